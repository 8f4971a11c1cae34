package box

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/hermes-box/hermes-box/host/internal/doctor"
)

// Doctor qualifies the smolvm on PATH with a throwaway machine (package
// doctor) and records the verdict for that binary. It holds the operation
// lock, and always asks for the VMM's confinement: the row measures what
// the release can do, whatever HERMES_BOX_VMM_CONFINEMENT says.
func Doctor(ctx context.Context, b *Box) (*doctor.Report, error) {
	var rep *doctor.Report
	if err := checkAgentSocket(b); err != nil {
		return nil, err
	}
	err := withLock(b, func() error {
		b.vm.Qualifying()
		b.vm.ConfineVMM(true)
		gw, err := doctorGateways()
		if err != nil {
			return err
		}
		port, err := freeLoopbackPort(ctx)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(b.cfg.ImagesDir(), 0o700); err != nil {
			return err
		}
		dir, err := os.MkdirTemp(b.cfg.ImagesDir(), ".doctor-")
		if err != nil {
			return err
		}
		d := &doctor.Doctor{VM: b.vm, Listener: b.listen, Gateways: gw, Name: fmt.Sprintf("hermes-doctor-%d", os.Getpid()), Port: port,
			Dir: dir, StepTimeout: b.timing.startupDeadline}
		rep, err = d.Run(ctx)
		return err
	})
	return rep, err
}

// doctorGateways reads the host's default gateway, or takes the test
// hook's address (a test never probes the real LAN).
func doctorGateways() (doctor.Gateways, error) {
	v := hookValue(hooks.lanGateway)
	if v == "" {
		return doctor.HostGateways{}, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hooks.lanGateway, err)
	}
	return doctor.FixedGateway(a), nil
}
