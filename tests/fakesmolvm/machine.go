package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

func (f *fake) create(in *smolvmcli.Invocation) error {
	r := &record{Name: nameOr(in), State: stateCreated, CPUs: 4, MemoryMiB: 8192, CreatedAt: now(),
		Image: in.Value("image"), From: in.Value("from"), Ports: in.Values["port"], Env: in.Values["env"],
		SecretEnv: in.Values["secret-env"], NetBackend: in.Value("net-backend")}
	// validate_vm_name (src/data/mod.rs).
	if err := config.CheckMachineName(r.Name, config.SmolvmNameMax); err != nil {
		return fmt.Errorf("machine name %w", err)
	}
	if _, err := f.load(r.Name); err == nil {
		return fmt.Errorf("machine '%s' already exists", r.Name)
	}
	if err := checkNetwork(in); err != nil {
		return err
	}
	r.Net = in.Bools["net"] || len(r.Ports) > 0 || in.Has("allow-cidr") || in.Has("allow-host") || in.Bools["outbound-localhost-only"]
	r.Egress = egressOf(in)
	if r.From != "" {
		// run_from_smolmachine keeps only the manifest's secret refs, and
		// 1.0.4 also drops the egress flags.
		r.SecretEnv = nil
		if release() == smolvmcli.V104 {
			r.Egress = nil
		}
	}
	for _, ref := range r.SecretEnv {
		guest, host, _ := strings.Cut(ref, "=")
		if os.Getenv(host) == "" {
			return fmt.Errorf("secret '%s': host environment variable '%s' is not set", guest, host)
		}
	}
	setInt(&r.CPUs, in.Value("cpus"))
	setInt(&r.MemoryMiB, in.Value("mem"))
	setInt(&r.StorageGB, in.Value("storage"))
	setInt(&r.OverlayGB, in.Value("overlay"))
	if err := os.MkdirAll(f.root(r.Name), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(f.data(r.Name), 0o755); err != nil {
		return err
	}
	var err error
	switch {
	case r.From != "":
		r.Entrypoint, r.Cmd, err = f.extract(r.Name, r.From)
	case r.Image != "":
		err = seedImage(f.root(r.Name), r.Image)
	}
	if err == nil {
		err = f.save(r)
	}
	if err != nil {
		os.RemoveAll(f.dir(r.Name))
		return err
	}
	fmt.Printf("Created machine: %s\n", r.Name)
	return nil
}

func egressOf(in *smolvmcli.Invocation) []string {
	var out []string
	for _, h := range in.Values["allow-host"] {
		out = append(out, "allow-host="+h)
	}
	for _, c := range in.Values["allow-cidr"] {
		out = append(out, "allow-cidr="+c)
	}
	if in.Bools["outbound-localhost-only"] {
		out = append(out, "outbound-localhost-only")
	}
	return out
}

// checkNetwork applies 1.0.4's backend rules (src/network/launch.rs).
func checkNetwork(in *smolvmcli.Invocation) error {
	intent := in.Bools["net"] || in.Has("port") || in.Has("allow-cidr") || in.Has("allow-host") || in.Bools["outbound-localhost-only"]
	switch backend := in.Value("net-backend"); {
	case backend == "virtio-net" && !intent:
		return errors.New("--net-backend virtio-net requires --net")
	case backend == "tsi" && in.Has("port"):
		return errors.New("published ports require the virtio-net backend (TSI is outbound-only)")
	}
	seen := map[int]bool{}
	for _, p := range in.Values["port"] {
		host, _ := smolvmcli.ParsePortMap(p)
		if seen[host] {
			return fmt.Errorf("duplicate host port %d", host)
		}
		seen[host] = true
	}
	return nil
}

func setInt(dst *int, v string) {
	if n, err := strconv.Atoi(v); err == nil {
		*dst = n
	}
}

// seedImage copies $FAKESMOLVM_IMAGES/<image> into root when it exists.
func seedImage(root, image string) error {
	base := os.Getenv("FAKESMOLVM_IMAGES")
	if base == "" {
		return nil
	}
	src := filepath.Join(base, strings.NewReplacer(":", "_", "/", "_").Replace(image))
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	return copyTree(src, root)
}

func (f *fake) start(in *smolvmcli.Invocation) error {
	r, err := f.load(nameOr(in))
	if err != nil {
		return err
	}
	if r.State == stateRunning {
		fmt.Printf("Machine '%s' is already running\n", r.Name)
		return nil
	}
	if r.State == statePaused || r.State == statePausing {
		return fmt.Errorf("machine '%s' is %s; resume it with `smolvm machine resume --name %s`", r.Name, r.State, r.Name)
	}
	if r.From != "" {
		if _, err := os.Stat(filepath.Join(f.layers(r.Name), markerName)); err != nil {
			r.State = stateFailed
			f.save(r)
			return fmt.Errorf("failed to start machine '%s': packed layers are missing (BadActivate)", r.Name)
		}
	}
	r.EgressFloor = os.Getenv("SMOLVM_EGRESS_FLOOR")
	os.Remove(filepath.Join(f.dir(r.Name), "force-state"))
	if err := f.halt(r); err != nil { // what is left of an entrypoint that ended
		return err
	}
	if err := f.allocGuest(r); err != nil {
		return err
	}
	if r.PID, err = f.startForwarder(r); err != nil {
		return fmt.Errorf("failed to start machine '%s': %w", r.Name, err)
	}
	if len(r.Entrypoint)+len(r.Cmd) > 0 {
		if r.EntryPID, err = f.startEntrypoint(r); err != nil {
			f.halt(r)
			return fmt.Errorf("failed to start machine '%s': %w", r.Name, err)
		}
	}
	r.State = stateRunning
	if err := f.save(r); err != nil {
		return err
	}
	startWatch(r)
	fmt.Printf("Started machine: %s\n", r.Name)
	return nil
}

func (f *fake) stop(in *smolvmcli.Invocation) error {
	r, err := f.load(nameOr(in))
	if err != nil {
		return err
	}
	if err := f.halt(r); err != nil {
		return err
	}
	fmt.Printf("Stopped machine: %s\n", r.Name)
	return nil
}

// halt ends the machine's entrypoint and forwarder and marks it stopped.
func (f *fake) halt(r *record) error {
	if r.State != stateRunning && r.State != stateUnreachable && r.PID == 0 && r.EntryPID == 0 {
		return nil
	}
	if r.EntryPID > 0 {
		stopEntrypoint(r.EntryPID)
		r.EntryPID = 0
	}
	if r.PID > 0 {
		stopForwarder(r.PID)
		r.PID = 0
	}
	os.Remove(filepath.Join(f.dir(r.Name), "force-state"))
	r.State = stateStopped
	return f.save(r)
}

func (f *fake) delete(in *smolvmcli.Invocation) error {
	r, err := f.load(in.Value("name"))
	if err != nil {
		return err
	}
	if r.State == stateRunning && !in.Bools["force"] {
		return fmt.Errorf("machine '%s' is running; stop it first or pass --force", r.Name)
	}
	if err := f.halt(r); err != nil {
		return err
	}
	if err := os.RemoveAll(f.dir(r.Name)); err != nil {
		return err
	}
	fmt.Printf("Deleted machine: %s\n", r.Name)
	return nil
}

func (f *fake) status(in *smolvmcli.Invocation) error {
	r, err := f.load(nameOr(in))
	if err != nil {
		return err
	}
	if !in.Bools["json"] {
		fmt.Printf("Machine: %s\nState: %s\n", r.Name, r.State)
		return nil
	}
	return printJSON(r.statusJSON())
}

func (f *fake) list(in *smolvmcli.Invocation) error {
	names, err := f.machineNames()
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, n := range names {
		r, err := f.load(n)
		if err != nil {
			return err
		}
		if in.Bools["json"] {
			out = append(out, r.statusJSON())
		} else {
			fmt.Printf("%s\t%s\n", r.Name, r.State)
		}
	}
	if in.Bools["json"] {
		return printJSON(out)
	}
	return nil
}

func printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", b)
	return err
}

func (f *fake) update(in *smolvmcli.Invocation) error {
	r, err := f.load(in.Value("name"))
	if err != nil {
		return err
	}
	if r.State == stateRunning || r.State == stateUnreachable {
		return fmt.Errorf("machine '%s' must be stopped before it can be updated", r.Name)
	}
	if in.Bools["net"] {
		r.Net = true
	}
	if in.Bools["no-net"] {
		r.Net = false
	}
	setInt(&r.CPUs, in.Value("cpus"))
	setInt(&r.MemoryMiB, in.Value("mem"))
	for _, flag := range []struct {
		val *int
		v   string
	}{{&r.StorageGB, in.Value("storage")}, {&r.OverlayGB, in.Value("overlay")}} {
		if n, err := strconv.Atoi(flag.v); err == nil {
			if n < *flag.val {
				return fmt.Errorf("disks can only grow: %d GiB is smaller than %d GiB", n, *flag.val)
			}
			*flag.val = n
		}
	}
	r.Ports = slices.DeleteFunc(append(r.Ports, in.Values["port"]...), func(p string) bool {
		return slices.Contains(in.Values["remove-port"], p)
	})
	r.Env = append(r.Env, in.Values["env"]...)
	if err := f.save(r); err != nil {
		return err
	}
	fmt.Printf("Updated machine: %s\n", r.Name)
	return nil
}

func (f *fake) dataDir(in *smolvmcli.Invocation) error {
	r, err := f.load(in.Value("name"))
	if err != nil {
		return err
	}
	fmt.Println(f.data(r.Name))
	return nil
}

// copy is `machine cp SRC DST` with NAME:/path on exactly one side.
func (f *fake) copy(in *smolvmcli.Invocation) error {
	src, dst := in.Args[0], in.Args[1]
	srcName, srcPath, srcGuest := guestPath(src)
	dstName, dstPath, dstGuest := guestPath(dst)
	if srcGuest == dstGuest {
		return errors.New("exactly one of SRC and DST must be NAME:/path")
	}
	name := srcName + dstName
	r, err := f.load(name)
	if err != nil {
		return err
	}
	if r.State != stateRunning {
		return fmt.Errorf("machine '%s' is not running", name)
	}
	if srcGuest {
		return copyFile(filepath.Join(f.root(name), srcPath), dst, 0o644)
	}
	// 1.0.4 writes guest files with the agent's default mode, not the
	// source's: an executable copied in is not executable there.
	return copyFile(src, filepath.Join(f.root(name), dstPath), 0o644)
}

// guestPath splits NAME:/abs/path.
func guestPath(arg string) (name, path string, ok bool) {
	name, path, ok = strings.Cut(arg, ":")
	if !ok || name == "" || strings.Contains(name, "/") || !strings.HasPrefix(path, "/") {
		return "", "", false
	}
	return name, path, true
}

// copyFile copies a regular file through a temp name, giving it mode.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".cp-tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// pause freezes a running machine's vCPUs (1.25 profile): its processes
// keep running here, only the state says paused.
func (f *fake) pause(in *smolvmcli.Invocation) error {
	r, err := f.load(nameOr(in))
	if err != nil {
		return err
	}
	if r.State != stateRunning {
		return fmt.Errorf("machine '%s' is not running", r.Name)
	}
	r.State = statePaused
	return f.save(r)
}

// resume thaws a paused machine.
func (f *fake) resume(in *smolvmcli.Invocation) error {
	r, err := f.load(nameOr(in))
	if err != nil {
		return err
	}
	if r.State != statePaused && r.State != statePausing {
		return fmt.Errorf("machine '%s' is not paused", r.Name)
	}
	r.State = stateRunning
	return f.save(r)
}
