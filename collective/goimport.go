package collective

import (
	"github.com/gocoll/gocoll/internal/importcache"
	"github.com/gocoll/gocoll/internal/pin"
)

// Plain Go slices imported in place: a large plain slice passed to a
// collective is imported by the rank's device the second time its memory
// is seen and kept imported for later calls (internal/importcache, whose
// package doc gives the design). A call adopts its slices at the start
// (importcache.Rank.AdoptPair, adoptCall) and releases them when it drained
// (releaseAdopted); Group.Close closes its ranks' imports and drops the
// references to the last call's slices the group kept (dropCallRefs).

// SetImportCacheBytes sets the process's budget for imported plain Go
// slices, in bytes, and returns the previous budget. The budget bounds the
// pages that devices hold imported for plain slices, across every group and
// sub-group of the process, whether the slices are still in use or were
// dropped and their imports not closed yet (see ImportedBytes). 0 turns
// importing off (every plain slice is staged); a negative n restores the
// default: GOCOLL_IMPORT_CACHE if set (bytes, or with a K, M or G suffix
// for KiB, MiB, GiB; 0 or "off" turns importing off), else 4 GiB. Imports
// over a lowered budget that no call is using are closed before it
// returns, the others once their calls end.
func SetImportCacheBytes(n int64) int64 { return importcache.SetBudget(n) }

// ImportedBytes reports the bytes of plain Go slices imported by devices in
// this process: the imports kept for later calls, those of slices the
// collector freed that are not closed yet, and those of a device declared
// lost. It is at most the budget (SetImportCacheBytes) plus the last.
func ImportedBytes() int64 { return importcache.Bytes() }

// newImportRank is c's side of the import cache, in its group's ig.
func (c *Comm) newImportRank(ig *importcache.Group, off bool) *importcache.Rank {
	return ig.NewRank(importcache.Device{Dev: c.dev, HostImport: c.info.HostImport, Off: off, Lost: c.isLost,
		Pinned: func(b []byte) bool { return pin.Lookup(b) != nil }, Failed: c.logImportFailed})
}

func (c *Comm) logImportFailed(n int, err error) {
	if c.g.logCalls {
		c.g.log.Debug("gocoll: plain slice staged: import failed", "rank", c.rank, "bytes", n, "err", err)
	}
}

// adoptCall adopts the large plain slices of a collective other than
// all-reduce (whose upload and download then run as DMA copies from and to
// the imported memory, as for HostBuffers); nothing for a group of one.
func (c *Comm) adoptCall(send, recv []byte) {
	if c.g.n > 1 {
		c.goImp.AdoptPair(send, recv)
	}
}

// releaseAdopted ends the current call's use of the slices it adopted, and
// of the slices it published to its peers (every peer is done with them:
// the call's last rendezvous, or waitAccess on failure).
func (c *Comm) releaseAdopted() {
	c.g.pub.DropSlices(c.rank)
	c.goImp.Release(c.g.isBroken.Load())
}

// dropCallRefs drops the references to the last calls' memory the group
// keeps for its ranks (Group.Close).
func (g *Group) dropCallRefs() { g.pub.Clear() }
