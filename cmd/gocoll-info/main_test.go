package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestTextListsHost(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{"\nhost: available, 1 device(s)\n", "  device 0: host\n", "    float64              yes",
		"    float32 kernels      the device's arithmetic: ", "default selection: "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// Every backend this build knows appears, available or with a reason.
	for _, name := range []string{"metal", "vulkan", "host"} {
		if !strings.Contains(s, "\n"+name+": ") {
			t.Errorf("backend %s not listed:\n%s", name, s)
		}
	}
}

func TestJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	found := false
	for _, b := range rep.Backends {
		if !b.Available && b.Reason == "" {
			t.Errorf("backend %s is unavailable without a reason", b.Name)
		}
		if b.Name == "host" {
			found = true
			if !b.Available || len(b.Devices) != 1 || !b.Devices[0].Float64 || b.Devices[0].Backend != "host" {
				t.Errorf("host backend: %+v", b)
			}
		}
	}
	if !found {
		t.Errorf("host backend missing:\n%s", out.String())
	}
	if rep.Selection.Backend == "" {
		t.Errorf("default selection failed: %s", rep.Selection.Error)
	}
}

func TestBadUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"extra"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}

func TestBytesString(t *testing.T) {
	for n, want := range map[int64]string{
		100:     "100 B",
		1 << 27: "128 MiB (134217728 B)",
		3 << 29: "1.5 GiB (1610612736 B)",
	} {
		if got := bytesString(n); got != want {
			t.Errorf("bytesString(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAutoTable(t *testing.T) {
	t.Setenv("GOCOLL_BACKEND", "host")
	var out, errb strings.Builder
	if code := run([]string{"-auto", "3"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "auto strategy on host, 3 ranks") || !strings.Contains(out.String(), "1 GiB") {
		t.Fatalf("no auto table:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-auto", "1"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "auto strategy on host, 1 rank (") {
		t.Fatalf("-auto 1: exit %d:\n%s", code, out.String())
	}
	if code := run([]string{"-auto", "-1"}, &out, &errb); code != 2 {
		t.Fatalf("-auto -1: exit %d", code)
	}
}
