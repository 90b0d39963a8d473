//go:build cgo && !novulkan && unix

package cshim

import (
	"errors"
	"golang.org/x/sys/unix"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestImportHost wraps mmap'd memory as a buffer (VK_EXT_external_memory_host)
// and has a kernel read it directly.
func TestImportHost(t *testing.T) {
	d := open(t, OpenOptions{})
	info := d.Info()
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if !info.ExternalMemoryHost {
		if _, err := d.ImportHost(mem); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("ImportHost without the extension: %v, want ErrUnsupported", err)
		}
		return
	}
	if _, err := d.ImportHost(mem[4 : 4+int(info.MinImportedHostPointerAlignment)]); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("misaligned ImportHost: %v, want ErrInvalidArgument", err)
	}
	b, err := d.ImportHost(mem)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, len(mem)/4)
	for i := range in {
		in[i] = float32(i)
	}
	putFloats(mem, in)
	k := scaleKernel(t, d, true)
	dst := newBuffer(t, d, int64(len(mem)), backend.HostVisible)
	var push [MaxPushBytes]byte
	n := uint32(len(in))
	if err := d.CmdDispatch(k, [3]uint32{n / 64, 1, 1}, []Binding{{Buffer: dst, Range: int64(len(mem))}, {Buffer: b, Range: int64(len(mem))}},
		scalePush(push[:], n, 0, 0, 0.5)); err != nil {
		t.Fatal(err)
	}
	tk, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(tk, -1); err != nil {
		t.Fatal(err)
	}
	got := floats(dst.Bytes())
	for i := range in {
		if got[i] != in[i]/2 {
			t.Fatalf("element %d = %v, want %v", i, got[i], in[i]/2)
		}
	}
	if &b.Bytes()[0] != &mem[0] {
		t.Error("Bytes() of an imported buffer is not the imported memory")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitIdle(); err != nil {
		t.Fatal(err)
	}
}
