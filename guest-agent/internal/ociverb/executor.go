// Package ociverb is the Executor helper's in-process `executor` verb:
// pull, activate, status and run (package executor does the work). Only
// the helper's main links it, and with it the image pull; the lean agent
// hands these subcommands to the helper and runs connect-hermes and
// refresh-discovery itself.
package ociverb

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/executor"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/verbenv"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Run is the executor verb.
func Run(ctx context.Context, e verbenv.Env, args []string) error { return runExecutor(ctx, e, args) }

func runExecutor(ctx context.Context, e verbenv.Env, args []string) error {
	if len(args) == 0 {
		return verbenv.Usagef("executor: want a subcommand: pull, activate, status, connect-hermes, refresh-discovery or run")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "pull", "activate":
		return executorInstall(ctx, e, sub, rest)
	case "status":
		return executorStatus(ctx, e, rest)
	case "run":
		return executorRun(ctx, e, rest)
	}
	return verbenv.Usagef("executor: unknown subcommand %q", sub)
}

func executorInstall(ctx context.Context, e verbenv.Env, sub string, args []string) error {
	fs := newFlags(e, "executor "+sub, "[--image NAME:TAG@sha256:DIGEST]")
	image := fs.String("image", pins.DefaultExecutorImage, "image reference, pinned by tag and digest")
	activate := fs.Bool("activate", false, "pull: activate the release afterwards")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "pull: stop after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ref, err := oci.ParseReference(*image)
	if err != nil {
		return verbenv.Usagef("executor %s: --image: %w", sub, err)
	}
	s, err := executor.NewStore(e.Root, executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.Events})
	if err != nil {
		return fmt.Errorf("executor %s: %w", sub, err)
	}
	var r *oci.Release
	switch {
	case sub == "activate":
		r, err = s.Activate(ctx, ref)
	case *activate:
		r, err = s.Install(ctx, ref)
	default:
		r, err = s.Pull(ctx, ref)
	}
	if err != nil {
		return fmt.Errorf("executor %s: %w", sub, err)
	}
	return writeJSON(e.Out, r)
}

// executorRun is the supervisor's `executor` program (executor.Run).
func executorRun(ctx context.Context, e verbenv.Env, args []string) error {
	if e.Relayed {
		return verbenv.Usagef("executor run is the supervisor's program and does not run through the relay")
	}
	fs := newFlags(e, "executor run", "(image and host port from $"+boxlayout.EnvExecutorImage+" and $"+boxlayout.EnvExecutorHostPort+")")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "stop a pull after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ref, hostPort, err := executor.RunInputs(os.Getenv)
	if err != nil {
		return verbenv.Usagef("executor run: %w", err)
	}
	o := executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.Events}
	if err := executor.Run(ctx, e.Root, ref, hostPort, o, e.Log); err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	return nil
}

func executorStatus(ctx context.Context, e verbenv.Env, args []string) error {
	fs := newFlags(e, "executor status", "[--sizes]")
	sizes := fs.Bool("sizes", false, "add the disk use of the runtime and data directories")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	res, err := executor.Status(ctx, e.Root, *sizes)
	if err != nil {
		return fmt.Errorf("executor status: %w", err)
	}
	return writeJSON(e.Out, res)
}

// newFlags returns a flag set for a subcommand that writes usage to stderr.
func newFlags(e verbenv.Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Err)
	fs.Usage = func() {
		fmt.Fprintf(e.Err, "usage: hermes-box-agent %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags and allows no positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return verbenv.Usagef("%s: %w", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return verbenv.Usagef("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}

// writeJSON writes v as indented JSON on stdout.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
