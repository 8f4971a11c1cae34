//go:build linux

// Command guestinit is the smolvm stand-in's own init inside the guest (it
// shares no code with hermes-box-agent, as real smolvm has its own agent).
// As PID 1 it mounts the kernel file systems, reaps orphans and runs itself
// again as "guestinit serve", which loads the virtio modules, configures the
// network from the kernel command line, serves exec/cp/boot/poweroff
// requests from the host on the virtio-serial ports named smolvm.ctl.N and
// runs the machine's entrypoint when the host asks for it.
package main

import (
	"fmt"
	"os"
)

func main() {
	switch {
	case len(os.Args) > 1 && os.Args[1] == "serve":
		if err := serve(); err != nil {
			fmt.Fprintf(os.Stderr, "guestinit: %v\n", err)
			os.Exit(1)
		}
	case os.Getpid() == 1:
		pid1()
	default:
		fmt.Fprintln(os.Stderr, "guestinit: run as PID 1 (init=) by the smolvm stand-in")
		os.Exit(2)
	}
}
