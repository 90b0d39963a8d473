package memory

import "testing"

func TestUses(t *testing.T) {
	owners := make([]Owner, MaxUses+3)
	var parent Uses
	if !parent.Add(&owners[0]) {
		t.Fatal("parent: open owner refused")
	}
	u := Uses{Parent: &parent}
	for i := range owners {
		if !u.Add(&owners[i]) || !u.Add(&owners[i]) {
			t.Fatalf("owner %d refused", i)
		}
	}
	if !u.Add(nil) {
		t.Fatal("nil owner refused")
	}
	// Each owner counted once: owner 0 by the parent only.
	for i := range owners {
		want := 1
		if owners[i].users != want {
			t.Fatalf("owner %d: %d users, want %d", i, owners[i].users, want)
		}
	}
	if u.Holds(&owners[0]) || !u.Holds(&owners[MaxUses+2]) {
		t.Fatal("Holds: wrong owners")
	}
	tk := u.Take()
	if tk.Parent != nil || u.Holds(&owners[1]) || !tk.Holds(&owners[1]) {
		t.Fatal("Take did not move the owners")
	}
	tk.Release()
	for i := 1; i < len(owners); i++ {
		if owners[i].users != 0 {
			t.Fatalf("owner %d: %d users after Release", i, owners[i].users)
		}
	}
	owners[1].Close()
	if u.Add(&owners[1]) {
		t.Fatal("closed owner acquired")
	}
	parent.Release()
	if owners[0].users != 0 {
		t.Fatal("parent's owner not released")
	}
}
