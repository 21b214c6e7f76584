package main

import "fmt"

var fmtSprintf = fmt.Sprintf
