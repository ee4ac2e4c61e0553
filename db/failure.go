package db

import (
	"time"

	"sandman/sandbox"
)

// Failure is the build's failure as facts (the zero Failure when it did not fail).
func (b Build) Failure() sandbox.Failure {
	return failureOf(b.FailureCode, b.FailureCommand, b.FailureExitCode, b.FailurePort, b.FailureLimitMs, b.FailureDetail)
}

// Failure is the failure an event records (a version whose dev server did not start), its
// output the tail of what the command printed; the zero Failure for any other event.
func (e SandboxEvent) Failure() sandbox.Failure {
	return failureOf(e.FailureCode, e.FailureCommand, e.FailureExitCode, e.FailurePort, e.FailureLimitMs, e.Output)
}

func failureOf(code *sandbox.BuildFailure, command string, exit, port *int32, limitMs *int64, output string) sandbox.Failure {
	if code == nil {
		return sandbox.Failure{}
	}
	f := sandbox.Failure{Code: *code, Command: command, Output: output}
	if exit != nil {
		f.ExitCode = *exit
	}
	if port != nil {
		f.Port = *port
	}
	if limitMs != nil {
		f.Limit = time.Duration(*limitMs) * time.Millisecond
	}
	return f
}

// FailureColumns is f as its columns store it: only what its code tells is set (an exit code of
// 0 is a fact for a start command that exited).
func FailureColumns(f sandbox.Failure) (code *sandbox.BuildFailure, exit, port *int32, limitMs *int64) {
	if !f.Failed() {
		return nil, nil, nil, nil
	}
	code = &f.Code
	switch f.Code {
	case sandbox.FailInstallFailed:
		exit = &f.ExitCode
	case sandbox.FailInstallTimedOut:
		limitMs = new(f.Limit.Milliseconds())
	case sandbox.FailStartExited:
		exit, port = &f.ExitCode, &f.Port
	case sandbox.FailStartNotAnswering:
		port, limitMs = &f.Port, new(f.Limit.Milliseconds())
	}
	return code, exit, port, limitMs
}
