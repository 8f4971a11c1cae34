// Package prompt reads a secret from the person at the terminal, or from
// standard input when it is not a terminal, so a secret never travels in
// argv; and asks the person at a terminal to confirm.
package prompt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// maxSecret bounds a secret read from a pipe.
const maxSecret = 4096

// Secret reads a secret without echo from a terminal (asking with label on
// w), else the first line of in (at most 4 KiB).
func Secret(in io.Reader, w io.Writer, label string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(w, "%s (input hidden): ", label)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(w)
		return string(b), err
	}
	line, err := bufio.NewReader(io.LimitReader(in, maxSecret)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the secret: %w", err)
	}
	return line, nil
}

// Confirm asks question on w and reads a yes or no from the terminal in;
// asked is false (and nothing is printed) when in is not a terminal, where
// nobody can answer.
func Confirm(in io.Reader, w io.Writer, question string) (yes, asked bool, err error) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, false, nil
	}
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, err := bufio.NewReader(io.LimitReader(in, maxSecret)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, true, fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, true, nil
	}
	return false, true, nil
}
