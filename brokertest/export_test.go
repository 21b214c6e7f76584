package brokertest

// FreeAddrRange is where FreeAddr picks ports.
var FreeAddrRange = portRange
