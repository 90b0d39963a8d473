package faultinject

import "github.com/gocoll/gocoll/backend"

// wrapStream returns the wrapper of inner's stream that has the optional
// interfaces inner has (backend.Compressor, backend.MultiReducer).
func wrapStream(st *stream, inner backend.Stream) backend.Stream {
	_, comp := inner.(backend.Compressor)
	_, multi := inner.(backend.MultiReducer)
	switch {
	case comp && multi:
		return &compressorMultiStream{&compressorStream{stream: st}}
	case comp:
		return &compressorStream{stream: st}
	case multi:
		return &multiStream{st}
	}
	return st
}

// multiStream is a stream whose wrapped stream reduces into several
// destinations in one pass.
type multiStream struct{ *stream }

func (s *multiStream) ReduceMulti(op backend.Op, dt backend.DType, dsts, srcs []backend.Region, scale float64) error {
	return s.reduceMulti(op, dt, dsts, srcs, scale)
}

// compressorMultiStream has both optional interfaces.
type compressorMultiStream struct{ *compressorStream }

func (s *compressorMultiStream) ReduceMulti(op backend.Op, dt backend.DType, dsts, srcs []backend.Region, scale float64) error {
	return s.reduceMulti(op, dt, dsts, srcs, scale)
}

// reduceMulti is Reduce for several destinations: one recorded command.
func (s *stream) reduceMulti(op backend.Op, dt backend.DType, dsts, srcs []backend.Region, scale float64) error {
	skip, err := s.record("reduce multi")
	if err != nil {
		return err
	}
	s.srcs = s.srcs[:0]
	for _, r := range srcs {
		s.srcs = append(s.srcs, s.unwrap(r))
	}
	for _, r := range dsts {
		s.srcs = append(s.srcs, s.unwrap(r))
	}
	if skip {
		return nil
	}
	k := len(srcs)
	return s.inner().(backend.MultiReducer).ReduceMulti(op, dt, s.srcs[k:], s.srcs[:k], scale)
}

var (
	_ backend.MultiReducer = (*multiStream)(nil)
	_ backend.MultiReducer = (*compressorMultiStream)(nil)
	_ backend.Compressor   = (*compressorMultiStream)(nil)
)
