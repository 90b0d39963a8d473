package cshim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gocoll/gocoll/backend"
)

// metalBufferSlots is the size of Metal's buffer argument table: the storage
// buffers and, after them, the push constants must fit in it.
const metalBufferSlots = 31

var (
	mslEntry  = regexp.MustCompile(`(?m)^kernel\s+void\s+(\w+)\s*\(`)
	mslBuffer = regexp.MustCompile(`\[\[\s*buffer\s*\(\s*(\d+)\s*\)\s*\]\]`)
)

// MetalKernel prepares MSL that spirv-cross generated from a kernel
// (kernels.MSL) for the Metal implementation's kernel_create, and returns
// what KernelDesc carries to it: the source as SPIRV (the field holds the
// code of either implementation), padded with newlines to whole 32-bit
// words, and the kernel function's name as Entry ("main0" from spirv-cross).
//
// metal.m binds storage buffer i at [[buffer(i)]] (setBuffer:offset:atIndex:)
// and the push constants after them, at [[buffer(bindings)]]
// (setBytes:length:atIndex:). spirv-cross --msl-decoration-binding maps the
// storage buffers so but leaves the push-constant block at [[buffer(0)]]
// too, an index Metal does not let two arguments share; MetalKernel moves it
// to [[buffer(bindings)]]. It checks that the entry's storage buffers are
// exactly [[buffer(0)]] .. [[buffer(bindings-1)]] with at most one constant
// block, and fails (wrapping backend.ErrInvalidArgument) on any other layout
// rather than guess.
func MetalKernel(msl string, bindings int) (code []byte, entry string, err error) {
	if bindings <= 0 || bindings+1 > metalBufferSlots {
		return nil, "", fmt.Errorf("cshim: MetalKernel: %d bindings: %w", bindings, backend.ErrInvalidArgument)
	}
	loc := mslEntry.FindAllStringSubmatchIndex(msl, -1)
	if len(loc) != 1 {
		return nil, "", fmt.Errorf("cshim: MetalKernel: %d kernel functions in the MSL source, want 1: %w", len(loc), backend.ErrInvalidArgument)
	}
	entry = msl[loc[0][2]:loc[0][3]]
	open := loc[0][1] // just after '('
	params, err := mslParams(msl, open)
	if err != nil {
		return nil, "", err
	}
	seen := make([]bool, bindings)
	push := -1 // index into params of the constant block
	for i, p := range params {
		m := mslBuffer.FindStringSubmatch(p.text)
		if m == nil {
			continue // a builtin such as [[thread_position_in_grid]]
		}
		idx, _ := strconv.Atoi(m[1])
		decl := strings.TrimSpace(p.text)
		switch {
		case strings.HasPrefix(decl, "constant "):
			if push >= 0 {
				return nil, "", fmt.Errorf("cshim: MetalKernel: %s has two constant buffers: %w", entry, backend.ErrInvalidArgument)
			}
			push = i
		case strings.HasPrefix(decl, "device ") || strings.HasPrefix(decl, "const device "):
			if idx >= bindings || seen[idx] {
				return nil, "", fmt.Errorf("cshim: MetalKernel: %s: storage buffer %q at index %d, want each of 0..%d once: %w",
					entry, decl, idx, bindings-1, backend.ErrInvalidArgument)
			}
			seen[idx] = true
		default:
			return nil, "", fmt.Errorf("cshim: MetalKernel: %s: buffer argument %q is neither device nor constant: %w",
				entry, decl, backend.ErrInvalidArgument)
		}
	}
	for i, ok := range seen {
		if !ok {
			return nil, "", fmt.Errorf("cshim: MetalKernel: %s has no storage buffer at index %d (%d bindings): %w",
				entry, i, bindings, backend.ErrInvalidArgument)
		}
	}
	var b strings.Builder
	b.Grow(len(msl) + 8)
	if push >= 0 {
		p := params[push]
		m := mslBuffer.FindStringSubmatchIndex(p.text)
		b.WriteString(msl[:p.off+m[0]])
		fmt.Fprintf(&b, "[[buffer(%d)]]", bindings)
		b.WriteString(msl[p.off+m[1]:])
	} else {
		b.WriteString(msl)
	}
	for b.Len()%4 != 0 {
		b.WriteByte('\n')
	}
	return []byte(b.String()), entry, nil
}

type mslParam struct {
	off  int // offset of text in the source
	text string
}

// mslParams splits the parameter list that starts at open (just after the
// '(') at its top-level commas.
func mslParams(src string, open int) ([]mslParam, error) {
	var out []mslParam
	depth, start := 0, open
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '(', '[', '<':
			depth++
		case ']', '>':
			depth--
		case ')':
			if depth == 0 {
				out = append(out, mslParam{start, src[start:i]})
				return out, nil
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, mslParam{start, src[start:i]})
				start = i + 1
			}
		}
	}
	return nil, fmt.Errorf("cshim: MetalKernel: unterminated kernel parameter list: %w", backend.ErrInvalidArgument)
}
