// Package transport serves remoting connections: a Server accepts them
// (retrying temporary accept errors such as EMFILE), reads frames — their
// memory allocated as their bytes arrive and reserved from a per-connection
// and a server-wide read budget (ServerOptions.MaxConnReadBytes,
// MaxReadBytes: past one, the connection stops reading until memory frees)
// — closes connections idle for ServerOptions.IdleTimeout (120 s), and hands each request to a Handler,
// which it serves on its own goroutine (or, for the cheap ones an
// InlineHandler names, on the connection's read loop, their answers
// written once per burst of input; those a BatchHandler names are served
// together, once per burst; those a DeferredBatchHandler names, such as
// sends that wait for an fsync, together once per burst on a goroutine of
// their own) and answers by opaque in any order. A Guard
// (access control) decides each request on the read loop as soon as it is
// decoded, before any of that. A ConnObserver hears of connections opening
// and closing. Only broken
// framing closes a connection; a header that cannot be decoded is answered
// with SYSTEM_ERROR.
//
// It knows nothing of what a request means: the name server (package
// namesrv) and the broker (package broker) are Handlers.
package transport
