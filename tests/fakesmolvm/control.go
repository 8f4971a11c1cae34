package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// LogEntry is one line of $FAKESMOLVM_LOG: the argv and the SMOLVM_*
// variables of the environment it ran with.
type LogEntry struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env,omitempty"`
}

type fake struct {
	state string // $FAKESMOLVM_STATE
	log   string // $FAKESMOLVM_LOG, "" for none
}

func newFake() (*fake, error) {
	state := os.Getenv("FAKESMOLVM_STATE")
	if state == "" {
		return nil, errors.New("FAKESMOLVM_STATE is not set")
	}
	if err := os.MkdirAll(filepath.Join(state, "machines"), 0o755); err != nil {
		return nil, err
	}
	return &fake{state: state, log: os.Getenv("FAKESMOLVM_LOG")}, nil
}

// record appends argv to the log. O_APPEND writes of one line are atomic
// enough for the small lines written here.
func (f *fake) record(argv []string) error {
	if f.log == "" {
		return nil
	}
	e := LogEntry{Argv: argv, Env: map[string]string{}}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "SMOLVM_") {
			e.Env[k] = v
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	lf, err := os.OpenFile(f.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	_, err = lf.Write(append(b, '\n'))
	return err
}

// failRule is one "SUBCOMMAND[@NAME][#N][=CODE]" rule.
type failRule struct {
	command string
	name    string
	nth     int // 0: every call
	code    int
}

func parseRules(text string) ([]failRule, error) {
	var rules []failRule
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := failRule{code: smolvmcli.ExitError}
		var err error
		if head, code, ok := strings.Cut(line, "="); ok {
			if r.code, err = strconv.Atoi(code); err != nil {
				return nil, fmt.Errorf("fail rule %q: bad exit code", line)
			}
			line = head
		}
		if head, nth, ok := strings.Cut(line, "#"); ok {
			if r.nth, err = strconv.Atoi(nth); err != nil || r.nth < 1 {
				return nil, fmt.Errorf("fail rule %q: bad occurrence", line)
			}
			line = head
		}
		r.command, r.name, _ = strings.Cut(line, "@")
		rules = append(rules, r)
	}
	return rules, nil
}

// injected reports whether a rule makes this call fail, and its status.
func (f *fake) injected(in *smolvmcli.Invocation) (int, bool) {
	text := os.Getenv("FAKESMOLVM_FAIL")
	if b, err := os.ReadFile(filepath.Join(f.state, "fail")); err == nil {
		text += "\n" + string(b)
	}
	r, ok, err := f.matching(in, text)
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err), true
	}
	if !ok {
		return 0, false
	}
	msg := os.Getenv("FAKESMOLVM_FAIL_MESSAGE")
	if msg == "" {
		msg = "injected failure"
	}
	fmt.Fprintln(os.Stderr, "Error: "+msg)
	return r.code, true
}

// matching parses rules and returns the first that matches this call.
func (f *fake) matching(in *smolvmcli.Invocation, rules string) (failRule, bool, error) {
	parsed, err := parseRules(rules)
	if err != nil {
		return failRule{}, false, err
	}
	for _, r := range parsed {
		if r.command != in.Command.Name() || (r.name != "" && r.name != target(in)) {
			continue
		}
		if r.nth == 0 || f.occurrences(r) == r.nth {
			return r, true, nil
		}
	}
	return failRule{}, false, nil
}

// hang makes a call that a rule of <state>/hang matches (the grammar of
// the fail rules, the code ignored) hang, as a smolvm stuck on a VM would:
// it appends its command to <state>/hang.reached and sleeps for an hour,
// until the caller kills it. Rules that do not parse fail the call.
func (f *fake) hang(in *smolvmcli.Invocation) (int, bool) {
	b, err := os.ReadFile(filepath.Join(f.state, "hang"))
	if err != nil {
		return 0, false
	}
	_, ok, err := f.matching(in, string(b))
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "hang rules: %v", err), true
	}
	if ok {
		if rf, err := os.OpenFile(filepath.Join(f.state, "hang.reached"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(rf, in.Command.Name())
			rf.Close()
		}
		time.Sleep(time.Hour)
	}
	return 0, false
}

// occurrences counts the logged calls matching r, this one included.
func (f *fake) occurrences(r failRule) int {
	lf, err := os.Open(f.log)
	if err != nil {
		return 0
	}
	defer lf.Close()
	n := 0
	sc := bufio.NewScanner(lf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e LogEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		in, err := smolvmcli.Parse(e.Argv)
		if err != nil || in.Version || in.Command.Name() != r.command {
			continue
		}
		if r.name == "" || target(in) == r.name {
			n++
		}
	}
	return n
}

// target is the machine a call is about.
func target(in *smolvmcli.Invocation) string {
	if n := in.Value("name"); n != "" {
		return n
	}
	if n := in.Value("from-vm"); n != "" {
		return n
	}
	for _, a := range in.Args {
		if name, _, ok := strings.Cut(a, ":"); ok && !strings.Contains(name, "/") {
			return name
		}
	}
	return ""
}

// machineNames lists the machines in the state dir, sorted.
func (f *fake) machineNames() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(f.state, "machines"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(f.state, "machines", e.Name(), "machine.json")); err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}
