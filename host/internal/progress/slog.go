package progress

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Handler is a slog.Handler that renders records through a Renderer, so
// log lines look like the rest of the output (a "warning: " line in text,
// an event in JSON) instead of slog's key=value lines.
type Handler struct {
	r     *Renderer
	level slog.Leveler
	attrs []slog.Attr
	group string
}

// NewHandler renders records at or above level through r.
func NewHandler(r *Renderer, level slog.Leveler) *Handler { return &Handler{r: r, level: level} }

// Enabled reports whether l is at or above the handler's level.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle renders one record.
func (h *Handler) Handle(_ context.Context, rec slog.Record) error {
	fields := map[string]string{}
	add := func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		fields[key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(add)
	ev := protocol.Event{Time: rec.Time.UTC(), Type: protocol.EventLog, Level: eventLevel(rec.Level), Message: rec.Message}
	if rec.Level >= slog.LevelWarn && rec.Level < slog.LevelError {
		ev.Type = protocol.EventWarning
	}
	if h.r.mode == JSON {
		if len(fields) > 0 {
			ev.Fields = fields
		}
	} else if len(fields) > 0 {
		ev.Message += " (" + formatFields(fields) + ")"
	}
	h.r.Event(ev)
	return nil
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &c
}

// WithGroup returns a handler that prefixes later keys with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

func eventLevel(l slog.Level) protocol.Level {
	switch {
	case l >= slog.LevelError:
		return protocol.LevelError
	case l >= slog.LevelWarn:
		return protocol.LevelWarn
	case l >= slog.LevelInfo:
		return protocol.LevelInfo
	}
	return protocol.LevelDebug
}

func formatFields(f map[string]string) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %s", k, f[k])
	}
	return strings.Join(parts, ", ")
}
