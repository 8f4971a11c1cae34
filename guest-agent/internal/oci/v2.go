package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrExecutorV2 is wrapped when an image is Executor v2's (beta): another
// runtime and layout, which hermes-box does not run yet.
//
//lint:ignore ST1005 it starts with the product's name, as the user reads it
var ErrExecutorV2 = errors.New("Executor v2 is not supported yet; pin a v1 image")

// v2Marker is the server entry of Executor v2's self-host image
// (`node apps/hosted/self-host/dist/main.mjs` in /app; upstream-today.md).
const v2Marker = "app/apps/hosted/self-host/dist/main.mjs"

// v2Signs lists what in an image's config is Executor v2's: a node
// command, port 4400 exposed, EXECUTOR_DATA_DIR=/app/data. v1 (bun, port
// 4788, /data) has none of them.
func v2Signs(config []byte) ([]string, error) {
	var cf struct {
		Config struct {
			Env          []string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]struct{}
		} `json:"config"`
	}
	if err := json.Unmarshal(config, &cf); err != nil {
		return nil, fmt.Errorf("decoding the image config: %w", err)
	}
	var signs []string
	argv := append(slices.Clone(cf.Config.Entrypoint), cf.Config.Cmd...)
	if len(argv) > 0 && filepath.Base(argv[0]) == "node" {
		signs = append(signs, "a node command")
	}
	if _, ok := cf.Config.ExposedPorts["4400/tcp"]; ok {
		signs = append(signs, "port 4400")
	}
	if slices.Contains(cf.Config.Env, "EXECUTOR_DATA_DIR=/app/data") {
		signs = append(signs, "EXECUTOR_DATA_DIR=/app/data")
	}
	return signs, nil
}

// checkNotV2 refuses, from its config and before any layer is fetched, an
// image with two or more of Executor v2's signs.
func checkNotV2(config []byte) error {
	signs, err := v2Signs(config)
	if err != nil {
		return err
	}
	if len(signs) >= 2 {
		return fmt.Errorf("%w: the image is laid out as Executor v2 (%s)", ErrExecutorV2, strings.Join(signs, ", "))
	}
	return nil
}

// isV2Release reports whether an extracted release holds Executor v2's
// server entry.
func isV2Release(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, v2Marker))
	return err == nil
}
