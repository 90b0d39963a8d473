package p2p

import "fmt"

// BlockedCall describes the published operation i (Blocked) for a
// deadlock's report: its call and peer ("Send to rank 2 (4 float)"), and
// whether it is a blocking Send's or a blocking Recv's; ok is false when
// none is published. The operation is read while the engine is pinned: it
// is reused once its call returns.
func (e *Engine) BlockedCall(i int) (call string, send, recv, ok bool) {
	e.Pin()
	defer e.Unpin()
	o := e.Blocked(i)
	if o == nil {
		return "", false, false, false
	}
	dir := "to"
	if !o.Send {
		dir = "from"
	}
	call = fmt.Sprintf("%s %s rank %d (%d %s)", o.Name, dir, o.Peer, o.Count, o.DT)
	return call, o.Send && o.Name == "Send", !o.Send && o.Name == "Recv", true
}
