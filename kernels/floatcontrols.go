package kernels

import (
	"encoding/binary"
	"fmt"
)

// SPIR-V float controls (SPV_KHR_float_controls, core in SPIR-V 1.4).
const (
	spvOpExtension     = 10
	spvOpExecutionMode = 16
	spvOpCapability    = 17

	spvModeDenormPreserve = 4459
	spvCapDenormPreserve  = 4464
	spvCapFirstFloatCtl   = 4464 // DenormPreserve .. RoundingModeRTZ
	spvCapLastFloatCtl    = 4468
	spvHeaderWords        = 5
	spvMagic              = 0x07230203
	spvExtFloatControls   = "SPV_KHR_float_controls"
)

// FloatControls says which widths of float a device keeps subnormals of in
// a kernel that declares DenormPreserve for them
// (VkPhysicalDeviceFloatControlsProperties.shaderDenormPreserveFloat16/32/64),
// and which widths a kernel may declare a denormal mode for alone
// (denormBehaviorIndependence). The zero value keeps none.
type FloatControls struct {
	DenormPreserve16, DenormPreserve32, DenormPreserve64 bool
	Independence                                         Independence
}

// Independence is VkShaderFloatControlsIndependence in an order whose zero
// is the common case: which float widths a kernel may give a denormal mode
// of their own.
type Independence int

const (
	// IndependenceAll: any width alone (..._INDEPENDENCE_ALL).
	IndependenceAll Independence = iota
	// Independence32BitOnly: 32 alone; 16 and 64 only together
	// (..._INDEPENDENCE_32_BIT_ONLY).
	Independence32BitOnly
	// IndependenceNone: every width together (..._INDEPENDENCE_NONE).
	IndependenceNone
)

// Keeps reports whether a kernel may declare DenormPreserve for floats of
// width bits alone (every gocoll kernel computes in one width) and the
// device then keeps their subnormals: the width's shaderDenormPreserveFloat,
// where the independence lets one width have a mode the others lack.
func (fc FloatControls) Keeps(width int) bool {
	switch {
	case fc.Independence == IndependenceNone:
		return false
	case fc.Independence == Independence32BitOnly && width != 32:
		return false
	}
	switch width {
	case 16:
		return fc.DenormPreserve16
	case 32:
		return fc.DenormPreserve32
	case 64:
		return fc.DenormPreserve64
	}
	return false
}

// AdaptFloatControls returns a kernel's SPIR-V for a device with float
// controls fc: every kernel with float arithmetic declares DenormPreserve for
// the width it computes in (kernels/denorm.glsl), and Vulkan forbids the
// mode for a width whose shaderDenormPreserveFloat* is false, or that the
// device's denormBehaviorIndependence ties to widths without it, so the
// declarations of the widths fc does not keep (Keeps) are removed, and with the last one the
// capability DenormPreserve and, where no float-controls capability is
// left, the extension SPV_KHR_float_controls. Nothing else changes. spirv is
// returned as it is when nothing is removed; else a new slice.
func AdaptFloatControls(spirv []byte, fc FloatControls) ([]byte, error) {
	words, err := spvWords(spirv)
	if err != nil {
		return nil, err
	}
	drop := func(w []uint32) bool {
		return w[0]&0xFFFF == spvOpExecutionMode && len(w) >= 4 && w[2] == spvModeDenormPreserve && !fc.Keeps(int(w[3]))
	}
	var dropped, kept int
	for _, w := range words {
		if w[0]&0xFFFF == spvOpExecutionMode && len(w) >= 4 && w[2] == spvModeDenormPreserve {
			if drop(w) {
				dropped++
			} else {
				kept++
			}
		}
	}
	if dropped == 0 {
		return spirv, nil
	}
	// Without a DenormPreserve mode left, the capability goes; with it the
	// last float-controls capability, the extension.
	capLeft := false
	for _, w := range words {
		if w[0]&0xFFFF == spvOpCapability && len(w) == 2 && w[1] >= spvCapFirstFloatCtl && w[1] <= spvCapLastFloatCtl &&
			(w[1] != spvCapDenormPreserve || kept > 0) {
			capLeft = true
		}
	}
	out := make([]byte, 0, len(spirv))
	out = append(out, spirv[:4*spvHeaderWords]...)
	for _, w := range words {
		switch op := w[0] & 0xFFFF; {
		case drop(w):
			continue
		case op == spvOpCapability && len(w) == 2 && w[1] == spvCapDenormPreserve && kept == 0:
			continue
		case op == spvOpExtension && !capLeft && spvString(w[1:]) == spvExtFloatControls:
			continue
		}
		for _, x := range w {
			out = binary.LittleEndian.AppendUint32(out, x)
		}
	}
	return out, nil
}

// DenormPreserveWidths returns the widths a kernel's SPIR-V declares
// DenormPreserve for, in the order declared.
func DenormPreserveWidths(spirv []byte) ([]int, error) {
	words, err := spvWords(spirv)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, w := range words {
		if w[0]&0xFFFF == spvOpExecutionMode && len(w) >= 4 && w[2] == spvModeDenormPreserve {
			out = append(out, int(w[3]))
		}
	}
	return out, nil
}

// spvWords splits SPIR-V (little-endian words, as glslc writes and the
// kernels embed) into its instructions, each its words, opcode and count
// first.
func spvWords(spirv []byte) ([][]uint32, error) {
	if len(spirv)%4 != 0 || len(spirv) < 4*spvHeaderWords || binary.LittleEndian.Uint32(spirv) != spvMagic {
		return nil, fmt.Errorf("kernels: not little-endian SPIR-V (%d bytes)", len(spirv))
	}
	all := make([]uint32, len(spirv)/4)
	for i := range all {
		all[i] = binary.LittleEndian.Uint32(spirv[4*i:])
	}
	var out [][]uint32
	for i := spvHeaderWords; i < len(all); {
		n := int(all[i] >> 16)
		if n == 0 || i+n > len(all) {
			return nil, fmt.Errorf("kernels: SPIR-V instruction at word %d has %d words, %d left", i, n, len(all)-i)
		}
		out = append(out, all[i:i+n])
		i += n
	}
	return out, nil
}

// spvString decodes a SPIR-V literal string (nul-terminated, packed four
// bytes a word, the first in the lowest byte).
func spvString(w []uint32) string {
	var b []byte
	for _, x := range w {
		for k := 0; k < 4; k++ {
			c := byte(x >> (8 * k))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return string(b)
}
