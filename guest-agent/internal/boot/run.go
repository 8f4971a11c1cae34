package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/shared/health"
)

// Config is one boot.
type Config struct {
	Options
	// Table is the program table; nil means the box's, from the machine's
	// environment.
	Table  *Table
	Logger *slog.Logger
}

// Run is the `boot` verb: it becomes a child subreaper, prepares the box,
// supervises the programs and answers the control socket until ctx ends
// (SIGTERM), then stops everything in order.
func Run(ctx context.Context, c Config) error {
	c.defaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	log := c.Logger
	if err := supervise.Subreaper(); err != nil {
		return err
	}
	if err := Prepare(ctx, c.Options); err != nil {
		return err
	}
	table := c.Table
	if table == nil {
		bo, err := BoxOptionsFromEnv(c.Getenv)
		if err != nil {
			return err
		}
		t := BoxTable(GatewayOptions(c.Root, bo))
		table = &t
		if err := WriteBoxOptions(c.Root, bo); err != nil {
			return fmt.Errorf("recording the box's options: %w", err)
		}
	}
	programs, err := table.Resolve(c.Root)
	if err != nil {
		return err
	}
	sup, err := supervise.New(programs, supervise.Options{ReapOrphans: true, Logger: log})
	if err != nil {
		return err
	}
	h := &handler{sup: sup, checks: table.Checks, now: c.Now, since: map[health.Code]health.Check{}}
	srv, err := control.Listen(control.Socket(c.Root), h, log)
	if err != nil {
		return errors.Join(err, sup.Close())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	if err := sup.StartAutostart(ctx); err != nil && ctx.Err() == nil {
		log.Error("starting programs", "err", err)
	}
	log.Info("boot: supervising", "programs", len(programs), "socket", control.Socket(c.Root))
	<-ctx.Done()
	log.Info("boot: stopping every program")
	err = srv.Close()
	err = errors.Join(err, <-served, sup.Close())
	if err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	log.Info("boot: stopped")
	return nil
}

// handler answers the control socket from the supervisor.
type handler struct {
	sup    *supervise.Supervisor
	checks []probe.CheckSpec
	now    func() time.Time

	mu    sync.Mutex
	since map[health.Code]health.Check // last result per check, for Since
}

// Handle implements control.Handler.
func (h *handler) Handle(ctx context.Context, req control.Request) control.Response {
	var err error
	switch req.Op {
	case control.OpStatus:
		return control.Response{Services: h.services()}
	case control.OpHealth:
		return h.health(ctx)
	case control.OpLogPath:
		p, ok := h.sup.Program(req.Name)
		if !ok {
			return control.Response{Error: fmt.Sprintf("no program %q", req.Name)}
		}
		if p.Log.Path == "" {
			return control.Response{Error: fmt.Sprintf("program %q has no log file", req.Name)}
		}
		return control.Response{LogPath: p.Log.Path}
	case control.OpStart:
		err = h.each(ctx, req.Name, h.sup.StartAll, h.sup.Start)
	case control.OpStop:
		err = h.each(ctx, req.Name, h.sup.StopAll, h.sup.Stop)
	case control.OpRestart:
		err = h.each(ctx, req.Name, func(ctx context.Context) error {
			return errors.Join(h.sup.StopAll(ctx), h.sup.StartAll(ctx))
		}, h.sup.Restart)
	default:
		return control.Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	resp := control.Response{Services: h.services()}
	if err != nil {
		resp.Error = err.Error()
	}
	return resp
}

func (h *handler) each(ctx context.Context, name string, all func(context.Context) error, one func(context.Context, string) error) error {
	if name == control.All {
		return all(ctx)
	}
	return one(ctx, name)
}

func (h *handler) services() []control.Service {
	var out []control.Service
	for _, st := range h.sup.Status() {
		out = append(out, control.Service{Service: st.Health(), Description: st.Description()})
	}
	return out
}

// health runs the checks; a check keeps its Since while its status holds.
func (h *handler) health(ctx context.Context) control.Response {
	svcs := h.services()
	plain := make([]health.Service, len(svcs))
	for i, s := range svcs {
		plain[i] = s.Service
	}
	checks := probe.RunChecks(ctx, h.checks, plain, h.now().UTC())
	h.mu.Lock()
	for code, c := range checks {
		if prev, ok := h.since[code]; ok && prev.Status == c.Status {
			c.Since = prev.Since
			checks[code] = c
		}
		h.since[code] = c
	}
	h.mu.Unlock()
	return control.Response{Services: svcs, Checks: checks}
}
