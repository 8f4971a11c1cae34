// Package releasematrix holds only tests: issue #23's hostile matrix on the
// release build (matrix_test.go), every verb of host/internal/agent's table
// driven by a command of the release hermes-box against a compromised agent
// behind Debian's sshd, or through the fake smolvm's exec. It is a package
// of its own so that `go test ./...` runs it beside host/internal/cli.
package releasematrix
