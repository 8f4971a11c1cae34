//go:build !linux

package main

import "errors"

// xattrRecords gives none: the fake reads extended attributes on Linux only.
func xattrRecords(string) (map[string]string, error) { return nil, nil }

// setXattrRecords refuses attributes it cannot set.
func setXattrRecords(_ string, recs map[string]string) error {
	if len(recs) > 0 {
		return errors.New("the fake sets extended attributes on Linux only")
	}
	return nil
}
