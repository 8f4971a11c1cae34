//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// xattrPrefix is the PAX record prefix of an extended attribute, as GNU
// tar and archive/tar write it.
const xattrPrefix = "SCHILY.xattr."

// xattrRecords reads a file's extended attributes as PAX records; a file
// system without them gives none.
func xattrRecords(path string) (map[string]string, error) {
	size, err := syscall.Listxattr(path, nil)
	switch {
	case errors.Is(err, syscall.ENOTSUP):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing the attributes of %s: %w", path, err)
	case size == 0:
		return nil, nil
	}
	names := make([]byte, size)
	if size, err = syscall.Listxattr(path, names); err != nil {
		return nil, fmt.Errorf("listing the attributes of %s: %w", path, err)
	}
	recs := map[string]string{}
	for _, name := range bytes.Split(bytes.TrimRight(names[:size], "\x00"), []byte{0}) {
		n, err := syscall.Getxattr(path, string(name), nil)
		if err != nil {
			return nil, fmt.Errorf("reading %s of %s: %w", name, path, err)
		}
		val := make([]byte, n)
		if n, err = syscall.Getxattr(path, string(name), val); err != nil {
			return nil, fmt.Errorf("reading %s of %s: %w", name, path, err)
		}
		recs[xattrPrefix+string(name)] = string(val[:n])
	}
	return recs, nil
}

// setXattrRecords sets the attributes the PAX records carry.
func setXattrRecords(path string, recs map[string]string) error {
	for k, v := range recs {
		name, ok := strings.CutPrefix(k, xattrPrefix)
		if !ok {
			continue
		}
		if err := syscall.Setxattr(path, name, []byte(v), 0); err != nil {
			return fmt.Errorf("setting %s on %s: %w", name, path, err)
		}
	}
	return nil
}
