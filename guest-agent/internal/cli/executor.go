//go:build oci

package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/executor"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/shared/pins"
)

var executorVerb = verb{
	name: "executor",
	summary: "Executor image: pull [--image REF] [--activate] | activate [--image REF] | status [--sizes] | " +
		"connect-hermes (API key on stdin) | refresh-discovery | run (the supervisor's program)",
	run: runExecutor,
}

func runExecutor(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("executor: want a subcommand: pull, activate, status, connect-hermes, refresh-discovery or run")
	}
	sub, rest := args[0], args[1:]
	if f, ok := executorHermesSubs[sub]; ok {
		return f(ctx, e, rest)
	}
	switch sub {
	case "pull", "activate":
		return executorInstall(ctx, e, sub, rest)
	case "status":
		return executorStatus(ctx, e, rest)
	case "run":
		return executorRun(ctx, e, rest)
	}
	return usageError("executor: unknown subcommand %q", sub)
}

func executorInstall(ctx context.Context, e *env, sub string, args []string) error {
	fs := newFlags(e, "executor "+sub, "[--image NAME:TAG@sha256:DIGEST]")
	image := fs.String("image", pins.DefaultExecutorImage, "image reference, pinned by tag and digest")
	activate := fs.Bool("activate", false, "pull: activate the release afterwards")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "pull: stop after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	ref, err := oci.ParseReference(*image)
	if err != nil {
		return usageError("executor %s: --image: %w", sub, err)
	}
	s, err := executor.NewStore(e.root, executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.events})
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
func executorRun(ctx context.Context, e *env, args []string) error {
	if e.relayed {
		return usageError("executor run is the supervisor's program and does not run through the relay")
	}
	fs := newFlags(e, "executor run", "(image and host port from $"+boot.EnvExecutorImage+" and $"+boot.EnvExecutorHostPort+")")
	stall := fs.Duration("stall-timeout", oci.DefaultStallTimeout, "stop a pull after this long without receiving a byte")
	certDir := fs.String("registry-ca-dir", "", "extra CA certificates (*.crt) for the registry")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	ref, hostPort, err := executor.RunInputs(os.Getenv)
	if err != nil {
		return usageError("executor run: %w", err)
	}
	o := executor.StoreOptions{StallTimeout: *stall, CertDir: *certDir, Events: e.events}
	if err := executor.Run(ctx, e.root, ref, hostPort, o, e.log); err != nil {
		return fmt.Errorf("executor run: %w", err)
	}
	return nil
}

func executorStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "executor status", "[--sizes]")
	sizes := fs.Bool("sizes", false, "add the disk use of the runtime and data directories")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	res, err := executor.Status(ctx, e.root, *sizes)
	if err != nil {
		return fmt.Errorf("executor status: %w", err)
	}
	return writeJSON(e.Out, res)
}
