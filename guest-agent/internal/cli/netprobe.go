package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/netprobe"
	"github.com/hermes-box/hermes-box/shared/netproof"
)

// maxPlanBytes bounds the plan read from stdin.
const maxPlanBytes = 64 << 10

func runNetprobe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "netprobe", "[--proc DIR]")
	proc := fs.String("proc", "", "proc file system (default <root>/proc)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *proc == "" {
		*proc = filepath.Join(e.root, "proc")
	}
	b, err := io.ReadAll(io.LimitReader(e.In, maxPlanBytes+1))
	if err != nil || len(b) > maxPlanBytes {
		return usageError("netprobe: reading the plan: %w", errors.Join(err, errors.New("at most 64 KiB")))
	}
	var plan netproof.Plan
	if err := json.Unmarshal(b, &plan); err != nil {
		return usageError("netprobe: the plan is not JSON: %w", err)
	}
	if err := plan.Validate(); err != nil {
		return usageError("netprobe: %w", err)
	}
	proof := netprobe.Run(ctx, plan, netprobe.Options{ProcDir: *proc})
	if err := json.NewEncoder(e.Out).Encode(proof); err != nil {
		return fmt.Errorf("netprobe: writing the proof: %w", err)
	}
	return proof.Verdict()
}
