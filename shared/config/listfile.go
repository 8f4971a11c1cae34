package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// readListFile reads a line-oriented list file (secret-env.txt,
// network-hosts.txt): on each line everything from the first "#" is a
// comment, a leading byte-order mark and surrounding space are dropped,
// blank lines are skipped, and every other line goes to each with its
// 1-based number. A missing file is no lines; a line over maxLineBytes is
// an *Error naming it. what names the file in other errors.
func readListFile(path, what string, each func(line int, text string) error) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", what, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		if text = strings.TrimSpace(strings.TrimPrefix(text, "\ufeff")); text == "" {
			continue
		}
		if err := each(line, text); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &Error{File: path, Line: line + 1, Msg: "line too long"}
		}
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}
