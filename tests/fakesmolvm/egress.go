package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// The egress denial log, as smolvm 1.8.1 and later keep it
// (src/agent/manager.rs): the VMM appends one line per refused connect,
// sendto or lookup to <data dir>/egress-denials.log, and
// `machine egress-events` reads the last 256 KiB of it. The fake has no
// VMM: whoever plays it (a test, the test agent's netprobe case
// vmm-denies) appends the lines in smolvm's shape,
//
//	[2026-08-13T02:31:05Z]: egress policy denied connect to 1.1.1.1:443
const (
	egressDenialsLog = "egress-denials.log"
	egressScanBytes  = 256 << 10
	egressMarker     = "egress policy denied "
)

// egressDenial is smolvm's EgressDenial.
type egressDenial struct {
	Timestamp string `json:"timestamp"`
	Operation string `json:"operation"`
	Dest      string `json:"dest"`
}

// egressEvents is `machine egress-events [--name N] [--limit L] [--json]`:
// the newest L (default 200) denials, oldest first; none when there is no
// log (smolvm does not check that the machine exists).
func (f *fake) egressEvents(in *smolvmcli.Invocation) error {
	limit := 200
	if v := in.Value("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		limit = n
	}
	events := readEgressDenials(filepath.Join(f.data(nameOr(in)), egressDenialsLog), limit)
	if in.Bools["json"] {
		b, err := json.MarshalIndent(events, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	if len(events) == 0 {
		fmt.Printf("No egress denials recorded for '%s'.\n", nameOr(in))
		return nil
	}
	fmt.Printf("%-30s %-9s DESTINATION\n", "TIMESTAMP", "OP")
	for _, e := range events {
		fmt.Printf("%-30s %-9s %s\n", e.Timestamp, e.Operation, e.Dest)
	}
	return nil
}

func readEgressDenials(path string, limit int) []egressDenial {
	events := []egressDenial{}
	f, err := os.Open(path)
	if err != nil {
		return events
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > egressScanBytes {
		_, _ = f.Seek(-egressScanBytes, io.SeekEnd)
	}
	tail, err := io.ReadAll(f)
	if err != nil {
		return events
	}
	for _, line := range strings.Split(string(tail), "\n") {
		if e, ok := parseEgressDenial(line); ok {
			events = append(events, e)
		}
	}
	if len(events) > limit {
		events = events[len(events)-limit:]
	}
	return events
}

// parseEgressDenial is smolvm's parse_egress_denial_line.
func parseEgressDenial(line string) (egressDenial, bool) {
	i := strings.Index(line, egressMarker)
	if i < 0 {
		return egressDenial{}, false
	}
	op, rest, ok := strings.Cut(line[i+len(egressMarker):], " ")
	if !ok || (op != "connect" && op != "sendto" && op != "resolve") {
		return egressDenial{}, false
	}
	dest := strings.TrimSpace(strings.TrimPrefix(rest, "to "))
	if dest == "" {
		return egressDenial{}, false
	}
	ts := ""
	if r, ok := strings.CutPrefix(line, "["); ok {
		if f := strings.Fields(r); len(f) > 0 {
			ts = strings.TrimSuffix(strings.TrimSuffix(f[0], ":"), "]")
		}
	}
	return egressDenial{Timestamp: ts, Operation: op, Dest: dest}, true
}
