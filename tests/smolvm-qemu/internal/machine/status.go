package machine

import "context"

// StatusJSON is the object smolvm 1.0.4 prints for a machine in `machine ls
// --json` and `machine status --json`. smolvm builds it with serde_json's
// json! macro without preserve_order, so the keys come out sorted; a Go map
// marshals the same way.
func (s *Store) StatusJSON(ctx context.Context, r *Record) map[string]any {
	state := s.State(ctx, r)
	var pid any
	if state == Running || state == Unreachable {
		pid = r.PID
	}
	var image any
	if r.Image != nil {
		image = *r.Image
	}
	return map[string]any{
		"name": r.Name, "state": state, "cpus": r.CPUs, "memory_mib": r.MemMiB, "pid": pid,
		"mounts": 0, "ports": len(r.Ports), "created_at": r.CreatedAt,
		"storage_gb": optU64(r.StorageGB), "overlay_gb": optU64(r.OverlayGB),
		"image": image, "entrypoint": nonNil(r.Entrypoint), "cmd": nonNil(r.Cmd),
		"ephemeral": false, "gpu": false, "gpu_vram_mib": nil,
		"restart_policy": "never", "restart_max_retries": 0, "restart_count": 0,
		"health_cmd": nil, "health_interval_secs": nil, "health_timeout_secs": nil,
		"health_retries": nil, "health_startup_grace_secs": nil,
		"network": r.Net,
	}
}

func optU64(v *uint64) any {
	if v == nil {
		return nil
	}
	return *v
}
