package machine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CtlPorts is how many control ports each machine gets, so that an exec
// can run while another one streams.
const CtlPorts = 4

// Files of a machine's data dir.
const (
	diskFile    = "disk.qcow2"
	kernelFile  = "vmlinuz"
	pidFile     = "qemu.pid"
	consoleFile = "console.log"
	initPath    = "/sbin/smolvm-qemu-init"
)

func ctlSocket(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("c%d.sock", i)) }

// Accel picks the accelerator: SMOLVM_QEMU_ACCEL if set, else KVM only
// when /dev/kvm exists and the CPU has hardware virtualisation (a PVM-backed
// /dev/kvm, as on Firecracker hosts, cannot run stock kernels), else TCG.
func Accel() string {
	if a := os.Getenv("SMOLVM_QEMU_ACCEL"); a != "" {
		return a
	}
	if GuestArch() != runtime.GOARCH {
		return "tcg" // another architecture is always emulated
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg"
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "flags") && (strings.Contains(line, " vmx") || strings.Contains(line, " svm")) {
			return "kvm"
		}
	}
	return "tcg"
}

// baseArgs is the QEMU command line of one boot of kernel on disk: -M pc
// (virt on arm64), root disk on NVMe (built into the Debian cloud kernel),
// the stand-in's init as PID 1, virtio-rng, the console to a file, and
// extra appended to the kernel command line.
func baseArgs(kernel, disk, consoleLog, extra string, cpus, memMiB int) []string {
	accel := Accel()
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	machine, tty := "pc", "ttyS0"
	if GuestArch() == "arm64" {
		// QARMA pointer authentication is slow under TCG; the
		// implementation-defined algorithm is much cheaper.
		machine, tty, cpu = "virt", "ttyAMA0", "max,pauth-impdef=on"
	}
	appendLine := fmt.Sprintf("console=%s root=/dev/nvme0n1 rw init=%s panic=-1 quiet %s", tty, initPath, extra)
	return []string{
		"-accel", accel, "-M", machine, "-cpu", cpu,
		"-smp", strconv.Itoa(min(max(cpus, 1), runtime.NumCPU())), "-m", strconv.Itoa(memMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "file:" + consoleLog,
		"-kernel", kernel, "-append", strings.TrimSpace(appendLine),
		"-drive", "file=" + disk + ",format=qcow2,if=none,id=d0",
		"-device", "nvme,drive=d0,serial=smolvmroot",
		"-device", "virtio-rng-pci",
	}
}

// qemuArgs is the QEMU command line of a machine: baseArgs plus
// user-mode networking with host forwards on 127.0.0.1 only, and
// virtio-serial control ports backed by unix sockets, daemonised.
func qemuArgs(dir string, r *Record) []string {
	extra := "smolvm.name=" + r.Name
	if r.Net || len(r.Ports) > 0 {
		extra += " smolvm.net=1"
	}
	a := append([]string{"-name", "smolvm-qemu:" + r.Name, "-daemonize", "-pidfile", filepath.Join(dir, pidFile)},
		baseArgs(filepath.Join(dir, kernelFile), filepath.Join(dir, diskFile), filepath.Join(dir, consoleFile), extra, r.CPUs, r.MemMiB)...)
	// As smolvm's VMM installs its seccomp allow-list under
	// SMOLVM_SECCOMP=enforce, QEMU installs its own (-sandbox on): the
	// host then reads Seccomp: 2 for the pid status reports.
	if os.Getenv("SMOLVM_SECCOMP") == "enforce" {
		a = append(a, "-sandbox", "on")
	}
	a = append(a, "-device", "virtio-serial-pci")
	for i := range CtlPorts {
		a = append(a, "-chardev", fmt.Sprintf("socket,id=c%d,path=%s,server=on,wait=off", i, ctlSocket(dir, i)),
			"-device", fmt.Sprintf("virtserialport,chardev=c%d,name=smolvm.ctl.%d", i, i))
	}
	if r.Net || len(r.Ports) > 0 {
		netdev := "user,id=n0"
		for _, p := range r.Ports {
			netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", p.Host, p.Guest)
		}
		a = append(a, "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,romfile=")
	}
	return a
}

// GuestArch is the guest's architecture: SMOLVM_QEMU_ARCH (amd64 or
// arm64), else amd64.
func GuestArch() string {
	if os.Getenv("SMOLVM_QEMU_ARCH") == "arm64" {
		return "arm64"
	}
	return "amd64"
}

// qemuBinary is SMOLVM_QEMU_BINARY, else the system emulator of GuestArch.
func qemuBinary() string {
	if q := os.Getenv("SMOLVM_QEMU_BINARY"); q != "" {
		return q
	}
	if GuestArch() == "arm64" {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}

// launch starts QEMU daemonised and returns its pid. QEMU's own parent
// exits once the VM is set up, so errors such as a busy host port come back
// here.
func launch(ctx context.Context, dir string, r *Record) (int, error) {
	for i := range CtlPorts {
		_ = os.Remove(ctlSocket(dir, i))
	}
	_ = os.Remove(filepath.Join(dir, pidFile))
	cmd := exec.CommandContext(ctx, qemuBinary(), qemuArgs(dir, r)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("qemu: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	pid, err := readPID(dir)
	if err != nil {
		return 0, fmt.Errorf("qemu started but %w", err)
	}
	return pid, nil
}

func readPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, fmt.Errorf("reading pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad pid file %q", b)
	}
	return pid, nil
}

// alive reports whether pid is a live (not zombie) QEMU of this data dir.
func alive(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(filepath.Join(dir, diskFile)))
}

// waitGone waits until pid is gone or the timeout passes.
func waitGone(pid int, dir string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for alive(pid, dir) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// kill ends QEMU: SIGTERM (QEMU exits cleanly), then SIGKILL after grace.
func kill(pid int, dir string, grace time.Duration) error {
	if !alive(pid, dir) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, dir, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, dir, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("qemu pid %d survived SIGKILL", pid)
}
