package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

var createCmd = command{
	usage: "smolvm machine create [OPTIONS]",
	flags: []flagSpec{
		{long: "name", short: 'n', value: "NAME"}, {long: "image", short: 'I', value: "IMAGE"},
		{long: "from", value: "PATH"}, {long: "cpus", value: "CPUS"}, {long: "mem", value: "MEM"},
		{long: "storage", value: "STORAGE"}, {long: "overlay", value: "OVERLAY"},
		{long: "port", short: 'p', value: "HOST:GUEST", repeat: true},
		{long: "env", short: 'e', value: "KEY=VALUE", repeat: true},
		{long: "secret-env", value: "GUEST_VAR=HOST_VAR", repeat: true},
		{long: "net"}, {long: "net-backend", value: "NET_BACKEND"},
	},
}

func create(ctx context.Context, argv []string, stdio IO) error {
	a, err := createCmd.parse(argv)
	if err != nil {
		return err
	}
	o, err := createOptions(a)
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

func createOptions(a *args) (machine.CreateOptions, error) {
	o := machine.CreateOptions{Name: a.get("name"), Image: a.get("image"), From: a.get("from"), Net: a.has("net"), NetBackend: a.get("net-backend")}
	if a.has("image") && a.has("from") {
		return o, &usageError{"the argument '--image <IMAGE>' cannot be used with '--from <PATH>'", createCmd.usage}
	}
	if o.Name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Name = "vm-" + hex.EncodeToString(b[:])
	}
	if !machine.ValidName(o.Name) {
		return o, fmt.Errorf("config operation failed: --name: invalid machine name '%s'", o.Name)
	}
	var err error
	if o.CPUs, err = intFlag(a, "cpus", 1, 255); err != nil {
		return o, err
	}
	if o.Mem, err = intFlag(a, "mem", 64, 1<<20); err != nil {
		return o, err
	}
	if o.Storage, err = gbFlag(a, "storage"); err != nil {
		return o, err
	}
	if o.Overlay, err = gbFlag(a, "overlay"); err != nil {
		return o, err
	}
	if o.Ports, err = ports(a.vals["port"]); err != nil {
		return o, err
	}
	if o.Env, err = envList(a); err != nil {
		return o, err
	}
	for _, spec := range a.vals["secret-env"] {
		g, h, err := keyValue("--secret-env", spec)
		if err != nil || h == "" {
			return o, fmt.Errorf("config operation failed: --secret-env: expected GUEST_VAR=HOST_VAR, got '%s'", spec)
		}
		o.Secrets = append(o.Secrets, machine.SecretRef{Guest: g, Host: h})
	}
	return o, netBackend(o)
}

// netBackend applies smolvm 1.0.4's backend rules: ports need virtio-net,
// and an explicit backend needs network intent (--net or a port).
func netBackend(o machine.CreateOptions) error {
	switch o.NetBackend {
	case "", "tsi", "virtio-net":
	default:
		return &usageError{fmt.Sprintf("invalid value '%s' for '--net-backend <NET_BACKEND>'\n  [possible values: tsi, virtio-net]", o.NetBackend), createCmd.usage}
	}
	if o.NetBackend == "tsi" && len(o.Ports) > 0 {
		return fmt.Errorf("config operation failed: network: published ports require the virtio-net backend (TSI is outbound-only)")
	}
	if o.NetBackend != "" && !o.Net && len(o.Ports) == 0 {
		return fmt.Errorf("config operation failed: network: --net-backend %s requires --net", o.NetBackend)
	}
	return nil
}

func intFlag(a *args, long string, lo, hi int) (int, error) {
	if !a.has(long) {
		return 0, nil
	}
	v := a.get(long)
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &usageError{fmt.Sprintf("invalid value '%s' for '--%s <%s>': expected an integer in %d..=%d", v, long, strings.ToUpper(long), lo, hi), createCmd.usage}
	}
	return n, nil
}

func gbFlag(a *args, long string) (*uint64, error) {
	n, err := intFlag(a, long, 1, 1<<16)
	if err != nil || !a.has(long) {
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
