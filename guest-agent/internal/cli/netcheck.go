package cli

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/netcheck"
)

func runNetcheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "netcheck", "[--arch ARCH] [--host NAME] [--proc DIR]")
	arch := fs.String("arch", runtime.GOARCH, "guest architecture, which picks the package host")
	host := fs.String("host", "", "host to resolve (default: the Ubuntu archive for --arch)")
	proc := fs.String("proc", "", "proc file system (default <root>/proc)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *host == "" {
		*host = netcheck.PackageHost(*arch)
	}
	if *proc == "" {
		*proc = filepath.Join(e.root, "proc")
	}
	r := netcheck.Check(ctx, netcheck.Options{ProcDir: *proc, Host: *host})
	if err := writeJSON(e.Out, r); err != nil {
		return err
	}
	if !r.Ready {
		var why []string
		for _, s := range []string{r.Route.Error, r.DNS.Error} {
			if s != "" {
				why = append(why, s)
			}
		}
		return &exitError{code: 1, err: errors.New("network not ready: " + strings.Join(why, "; "))}
	}
	return nil
}
