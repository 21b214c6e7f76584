package store

const childEnv = "BROKERCORE_STORE_CRASH_CHILD"

func crashChild() int { return 0 }
