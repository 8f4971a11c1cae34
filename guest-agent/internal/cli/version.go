package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.Out, "hermes-box-agent %s %s/%s protocol %d\n", buildinfo.Version, runtime.GOOS, runtime.GOARCH, protocol.Version)
	return err
}
