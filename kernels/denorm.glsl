// denorm.glsl declares the SPIR-V execution mode DenormPreserve for floats of
// DENORM_WIDTH bits (32 or 64; SPV_KHR_float_controls, core in Vulkan 1.2):
// on a device that reports shaderDenormPreserveFloat32 (Float64), subnormal
// inputs and results of the kernel's float instructions of that width are
// kept as IEEE 754 says instead of being flushed to zero, which Vulkan
// otherwise allows and NVIDIA's driver does. Every kernel with float
// arithmetic includes it; kernels/float_controls_test.go checks that. A
// device that does not take the mode gets the kernel without it
// (kernels.AdaptFloatControls), whose float arithmetic must then be right
// when subnormals flush (the _ftz variants and the 16-bit kernels: the
// hardware sees only normal values, float32.glsl), or rest on the device's
// own behaviour (the f64 kernels; the float32 ones where a self-test at open
// found the device keeping subnormals).
//
// Capability DenormPreserve is 4464 and execution mode DenormPreserve 4459
// (SPIR-V 1.4 / SPV_KHR_float_controls).
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, DENORM_WIDTH);
