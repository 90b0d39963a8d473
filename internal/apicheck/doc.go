// Package apicheck holds TestAPI, a golden-file check of the exported API of
// the library, in the manner of Go's own api/*.txt files: changes to the
// exported surface of the packages listed in packages must be deliberate.
//
// TestAPI lists every exported declaration of each package (the files that
// `go build` selects on linux/amd64 with cgo, _test.go files excluded), one
// sorted line per declaration, and compares the listing with api/<pkg>.txt
// at the module root. A package that builds differently under tags (mpi,
// with -tags mpi) must also list the same lines in each tagged build
// (alsoTagged). When an exported API changes on purpose, rewrite the
// golden files and check them in with the change:
//
//	go test ./internal/apicheck -update
package apicheck
