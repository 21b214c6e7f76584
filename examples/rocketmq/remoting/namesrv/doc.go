// Package namesrv is the name server of the one broker: a transport.Handler
// answering GET_ROUTEINFO_BY_TOPIC from the broker's topic table, creating
// a topic on its first lookup unless NoAutoCreate.
package namesrv
