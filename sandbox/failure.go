package sandbox

import "time"

// BuildFailure is why a build failed, or a version's dev server did not start (the
// build_failure enum): lifecycle records it with its facts (Failure), views writes its sentence.
type BuildFailure string

// The build failures.
const (
	// The founder's code: the credit stays spent.
	FailInstallFailed     BuildFailure = "install_failed"      // the install command exited non-zero
	FailInstallTimedOut   BuildFailure = "install_timed_out"   // the install command did not finish within its limit
	FailStartExited       BuildFailure = "start_exited"        // the start command exited before it answered
	FailStartNotAnswering BuildFailure = "start_not_answering" // the start command did not answer within its limit
	// The platform's doing, or a person's: the credit is given back (but for replaced).
	FailProvider        BuildFailure = "provider"         // the provider failed it (errors after retries, the sandbox lost)
	FailWorkerLost      BuildFailure = "worker_lost"      // the worker running it went away
	FailOperatorStopped BuildFailure = "operator_stopped" // an operator killed it before it finished
	FailReplaced        BuildFailure = "replaced"         // a rebuild replaced it before it finished
	// FailOther: recorded before the codes existed; its sentence is the stored detail.
	FailOther BuildFailure = "other"
)

// Failure is a failed build's or version's facts: its code and what its sentence tells. Only
// the command failures have the rest: Command is the command that failed, ExitCode its exit code
// (FailInstallFailed, FailStartExited), Port the port the app was to answer on (FailStart*),
// Limit the time it was given (FailInstallTimedOut, FailStartNotAnswering), Output the tail of
// what it printed. A FailOther's Output is its old sentence.
type Failure struct {
	Code     BuildFailure
	Command  string
	ExitCode int32
	Port     int32
	Limit    time.Duration
	Output   string
}

// Failed reports whether f is a failure (the zero Failure is none).
func (f Failure) Failed() bool { return f.Code != "" }
