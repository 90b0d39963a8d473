package pin

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/google/go-cmp/cmp"
)

// fakeDev imports host memory into fakeBufs and records what it did.
type fakeDev struct {
	backend.Device
	log *[]string
}

func (d fakeDev) Import(p []byte) (backend.Buffer, error) {
	*d.log = append(*d.log, "import")
	return fakeBuf{log: d.log}, nil
}

type fakeBuf struct {
	backend.Buffer
	log *[]string
}

func (b fakeBuf) Close() error {
	*b.log = append(*b.log, "close")
	return nil
}

// A rank imports a buffer once; closing the buffer closes every rank's
// import (a lost rank's is leaked), and a rank's Close closes its own.
func TestImportOnceCloseWithBuffer(t *testing.T) {
	var log []string
	m, err := Alloc(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	lost := false
	r0 := NewRank(fakeDev{log: &log}, func() bool { return false })
	r1 := NewRank(fakeDev{log: &log}, func() bool { return lost })
	b := m.Bytes()[4096 : 2*4096]
	type region struct{ Off, Len int }
	var got []region
	for _, r := range []*Rank{r0, r0, r1} {
		reg, ok, err := r.Region(m, b)
		if !ok || err != nil {
			t.Fatalf("Region: %v, %v", ok, err)
		}
		got = append(got, region{reg.Off, reg.Len})
	}
	if d := cmp.Diff([]region{{4096, 4096}, {4096, 4096}, {4096, 4096}}, got); d != "" {
		t.Errorf("regions (-want +got):\n%s", d)
	}
	lost = true
	leak, err := m.CloseImports()
	if !leak || err != nil {
		t.Errorf("CloseImports with a lost rank: leak %v, err %v; want a leak", leak, err)
	}
	if d := cmp.Diff([]string{"import", "import", "close"}, log); d != "" {
		t.Errorf("device operations (-want +got):\n%s", d)
	}
	if len(r0.imported) != 0 || len(r1.imported) != 0 {
		t.Error("a rank kept the import of a closed buffer")
	}

	log = nil
	m2, err := Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r0.Region(m2, m2.Bytes()); !ok || err != nil {
		t.Fatalf("Region: %v, %v", ok, err)
	}
	r0.Close()
	if leak, err := m2.CloseImports(); leak || err != nil {
		t.Errorf("CloseImports after the rank's Close: leak %v, err %v", leak, err)
	}
	if d := cmp.Diff([]string{"import", "close"}, log); d != "" {
		t.Errorf("device operations (-want +got):\n%s", d)
	}
	for _, x := range []*Mem{m, m2} {
		unregistered := false
		if err := x.Release(func([]byte) { unregistered = true }); err != nil || !unregistered {
			t.Errorf("Release: %v, unregistered %v", err, unregistered)
		}
	}
}

// A device that imports nothing gives no region.
func TestNoImporter(t *testing.T) {
	m, err := Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(func([]byte) {})
	if _, ok, err := NewRank(nil, func() bool { return false }).Region(m, m.Bytes()); ok || err != nil {
		t.Errorf("Region without an importer: %v, %v", ok, err)
	}
}
