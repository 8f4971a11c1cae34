//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// portPrefix names the control ports the stand-in attaches.
const portPrefix = "smolvm.ctl."

var modules = []string{"virtio_pci", "virtio_net", "virtio_console", "virtio-rng"}

// serve prepares the guest and serves the control ports until power-off.
func serve() error {
	os.Setenv("PATH", defaultPath)
	args := kernelArgs()
	if out, err := exec.Command("modprobe", append([]string{"-a"}, modules...)...).CombinedOutput(); err != nil {
		console("modprobe: %v: %s", err, out)
	}
	if name := args["smolvm.name"]; name != "" {
		_ = syscall.Sethostname([]byte(name))
	}
	run("ip", "link", "set", "lo", "up")
	if args["smolvm.net"] == "1" {
		if err := network(); err != nil {
			console("network: %v", err)
		}
	}
	ports, err := findPorts(10 * time.Second)
	if err != nil {
		return err
	}
	for _, p := range ports {
		go newPort(p).loop()
	}
	console("ready on %d control ports", len(ports))
	select {}
}

// kernelArgs returns the key=value words of /proc/cmdline.
func kernelArgs() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	m := map[string]string{}
	for _, w := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(w, "=")
		m[k] = v
	}
	return m
}

func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// network configures eth0 for QEMU's user-mode network (guest 10.0.2.15,
// gateway and host loopback 10.0.2.2, DNS 10.0.2.3).
func network() error {
	for i := 0; i < 50; i++ {
		if _, err := os.Stat("/sys/class/net/eth0"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, argv := range [][]string{
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "addr", "add", "10.0.2.15/24", "dev", "eth0"},
		{"ip", "route", "add", "default", "via", "10.0.2.2"},
	} {
		if err := run(argv...); err != nil {
			return err
		}
	}
	return os.WriteFile("/etc/resolv.conf", []byte("nameserver 10.0.2.3\n"), 0o644)
}

// findPorts waits for the control ports to appear (the virtio_console
// module probes them asynchronously) and returns their device paths.
func findPorts(wait time.Duration) ([]string, error) {
	deadline := time.Now().Add(wait)
	for {
		var ports []string
		names, _ := filepath.Glob("/sys/class/virtio-ports/vport*")
		for _, dir := range names {
			b, err := os.ReadFile(filepath.Join(dir, "name"))
			if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), portPrefix) {
				ports = append(ports, "/dev/"+filepath.Base(dir))
			}
		}
		if len(ports) > 0 && (len(ports) >= 4 || time.Now().After(deadline)) {
			return ports, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio port named %s* after %s", portPrefix, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
