package brokercore

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// SlogLogger returns a *slog.Logger that writes into a Watermill logger, so
// the store and pop service log where the rest of the application's Watermill
// logs go. Levels map as: Error and above → Error (an attribute named "err"
// or "error" holding an error becomes its err argument), Warn and Info → Info
// (Warn keeps a "level" field), Debug → Debug, below → Trace. Nil or
// watermill.NopLogger gives a logger that discards everything without
// formatting it.
func SlogLogger(l watermill.LoggerAdapter) *slog.Logger {
	if l == nil {
		return slog.New(discardHandler{})
	}
	if _, nop := l.(watermill.NopLogger); nop {
		return slog.New(discardHandler{})
	}
	return slog.New(&slogHandler{out: l})
}

// slogHandler is a slog.Handler over a watermill.LoggerAdapter. Watermill has
// no level query, so Enabled always says yes and the adapter filters.
type slogHandler struct {
	out    watermill.LoggerAdapter
	prefix string              // open groups, "a.b."
	fields watermill.LogFields // from WithAttrs
}

func (h *slogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make(watermill.LogFields, len(h.fields)+r.NumAttrs())
	for k, v := range h.fields {
		fields[k] = v
	}
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && (a.Key == "err" || a.Key == "error") && err == nil {
			err = e
			return true
		}
		addAttr(fields, h.prefix, a)
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		if err == nil {
			err = errors.New(r.Message)
		}
		h.out.Error(r.Message, err, fields)
	case r.Level >= slog.LevelInfo:
		if r.Level >= slog.LevelWarn {
			fields["level"] = r.Level.String()
		}
		if err != nil {
			fields["err"] = err.Error()
		}
		h.out.Info(r.Message, fields)
	case r.Level >= slog.LevelDebug:
		if err != nil {
			fields["err"] = err.Error()
		}
		h.out.Debug(r.Message, fields)
	default:
		if err != nil {
			fields["err"] = err.Error()
		}
		h.out.Trace(r.Message, fields)
	}
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make(watermill.LogFields, len(h.fields)+len(attrs))
	for k, v := range h.fields {
		fields[k] = v
	}
	for _, a := range attrs {
		addAttr(fields, h.prefix, a)
	}
	return &slogHandler{out: h.out, prefix: h.prefix, fields: fields}
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &slogHandler{out: h.out, prefix: h.prefix + name + ".", fields: h.fields}
}

// addAttr flattens a (possibly grouped) attribute into fields.
func addAttr(fields watermill.LogFields, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			addAttr(fields, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	fields[prefix+a.Key] = v.Any()
}

// discardHandler drops every record before it is built.
type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (d discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discardHandler) WithGroup(string) slog.Handler           { return d }
