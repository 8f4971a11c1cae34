package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

func create(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	o, err := createOptions(in)
	if err != nil {
		return err
	}
	err = locked(func(s *machine.Store) error {
		return s.Create(ctx, o, os.Getenv("SMOLVM_QEMU_IMAGE"))
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "Created machine '%s'\n", o.Name)
	return nil
}

func createOptions(in *smolvmcli.Invocation) (machine.CreateOptions, error) {
	o := machine.CreateOptions{Name: in.Value("name"), Image: in.Value("image"), From: in.Value("from"), Net: in.Has("net"), NetBackend: in.Value("net-backend")}
	if o.Name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Name = "vm-" + hex.EncodeToString(b[:])
	}
	if !machine.ValidName(o.Name) {
		return o, fmt.Errorf("config operation failed: --name: invalid machine name '%s'", o.Name)
	}
	var err error
	if o.CPUs, err = intFlag(in, "cpus", 1, 255); err != nil {
		return o, err
	}
	if o.Mem, err = intFlag(in, "mem", 64, 1<<20); err != nil {
		return o, err
	}
	if o.Storage, err = gbFlag(in, "storage"); err != nil {
		return o, err
	}
	if o.Overlay, err = gbFlag(in, "overlay"); err != nil {
		return o, err
	}
	if o.Ports, err = ports(in.Values["port"]); err != nil {
		return o, err
	}
	if o.Env, err = envList(in); err != nil {
		return o, err
	}
	for _, spec := range in.Values["secret-env"] {
		g, h, err := keyValue("--secret-env", spec)
		if err != nil || h == "" {
			return o, fmt.Errorf("config operation failed: --secret-env: expected GUEST_VAR=HOST_VAR, got '%s'", spec)
		}
		o.Secrets = append(o.Secrets, machine.SecretRef{Guest: g, Host: h})
	}
	if in.Value("from") != "" {
		// smolvm's run_from_smolmachine keeps only the pack's own secret
		// refs: --secret-env is accepted and dropped (1.0.4 and 1.9.x).
		o.Secrets = nil
	}
	return o, netBackend(o)
}

// netBackend applies smolvm 1.0.4's backend rules (the grammar has
// checked the value): ports need virtio-net, and an explicit backend needs
// network intent (--net or a port).
func netBackend(o machine.CreateOptions) error {
	if o.NetBackend == "tsi" && len(o.Ports) > 0 {
		return fmt.Errorf("config operation failed: network: published ports require the virtio-net backend (TSI is outbound-only)")
	}
	if o.NetBackend != "" && !o.Net && len(o.Ports) == 0 {
		return fmt.Errorf("config operation failed: network: --net-backend %s requires --net", o.NetBackend)
	}
	return nil
}

// intFlag reads a number the grammar has checked, within the stand-in's
// bounds.
func intFlag(in *smolvmcli.Invocation, long string, lo, hi int) (int, error) {
	if !in.Has(long) {
		return 0, nil
	}
	v := in.Value(long)
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &smolvmcli.UsageError{Msg: fmt.Sprintf("invalid value '%s' for '--%s <%s>': expected an integer in %d..=%d", v, long, strings.ToUpper(long), lo, hi)}
	}
	return n, nil
}

func gbFlag(in *smolvmcli.Invocation, long string) (*uint64, error) {
	n, err := intFlag(in, long, 1, 1<<16)
	if err != nil || !in.Has(long) {
		return nil, err
	}
	v := uint64(n)
	return &v, nil
}

// ports parses -p HOST:GUEST or -p PORT (same on both sides); 0 and
// duplicate host ports are refused, as smolvm's PortMapping does.
func ports(specs []string) ([]machine.Port, error) {
	var out []machine.Port
	seen := map[uint16]bool{}
	for _, spec := range specs {
		h, g, ok := strings.Cut(spec, ":")
		if !ok {
			g = h
		}
		hp, err1 := strconv.ParseUint(h, 10, 16)
		gp, err2 := strconv.ParseUint(g, 10, 16)
		if err1 != nil || err2 != nil || strings.Count(spec, ":") > 1 {
			return nil, fmt.Errorf("config operation failed: validate ports: invalid port mapping '%s': expected HOST:GUEST or PORT", spec)
		}
		if hp == 0 || gp == 0 {
			return nil, fmt.Errorf("config operation failed: validate ports: port 0 is not allowed in '%s'", spec)
		}
		if seen[uint16(hp)] {
			return nil, fmt.Errorf("config operation failed: validate ports: duplicate host port %d", hp)
		}
		seen[uint16(hp)] = true
		out = append(out, machine.Port{Host: uint16(hp), Guest: uint16(gp)})
	}
	return out, nil
}
