//go:build !cgo || novulkan

package ddp

import "testing"

const vulkanBuilt = false

func checkValidation(testing.TB) {}
