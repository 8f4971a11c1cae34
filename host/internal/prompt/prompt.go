// Package prompt reads a secret from the person at the terminal, or from
// standard input when it is not a terminal, so a secret never travels in argv.
package prompt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

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
