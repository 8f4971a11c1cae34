package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
)

// StatusResult is the JSON result of `executor status`.
type StatusResult struct {
	Current      *oci.Release  `json:"current"`
	Releases     []oci.Release `json:"releases"`
	RuntimeBytes *int64        `json:"runtimeBytes,omitempty"`
	DataBytes    *int64        `json:"dataBytes,omitempty"`
}

// Status reports the active release and the others; with sizes, the disk
// use of the runtime and data directories too (bounded to 45 s).
func Status(ctx context.Context, root string, sizes bool) (StatusResult, error) {
	p := PathsFor(root)
	s := &oci.Store{Root: p.Runtime}
	var res StatusResult
	var err error
	if res.Current, err = s.Current(); err != nil {
		return res, err
	}
	if res.Releases, err = s.Releases(); err != nil {
		return res, err
	}
	if !sizes {
		return res, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	for _, d := range []struct {
		dir string
		dst **int64
	}{{p.Runtime, &res.RuntimeBytes}, {p.Data, &res.DataBytes}} {
		n, err := diskUse(sctx, d.dir)
		if err != nil {
			return res, err
		}
		*d.dst = &n
	}
	return res, nil
}

// diskUse sums the allocated size of the files under dir (0 if missing).
func diskUse(ctx context.Context, dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return n, nil
}
