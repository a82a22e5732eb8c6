package asl

import "fmt"

// Predefined error names of the States Language.
const (
	ErrorAll                    = "States.ALL"
	ErrorTaskFailed             = "States.TaskFailed"
	ErrorTimeout                = "States.Timeout"
	ErrorHeartbeatTimeout       = "States.HeartbeatTimeout"
	ErrorRuntime                = "States.Runtime"
	ErrorDataLimitExceeded      = "States.DataLimitExceeded"
	ErrorNoChoiceMatched        = "States.NoChoiceMatched"
	ErrorIntrinsicFailure       = "States.IntrinsicFailure"
	ErrorParameterPathFailure   = "States.ParameterPathFailure"
	ErrorResultPathMatchFailure = "States.ResultPathMatchFailure"
	ErrorBranchFailed           = "States.BranchFailed"
	ErrorPermissions            = "States.Permissions"
	ErrorExceedToleratedFailure = "States.ExceedToleratedFailureThreshold"
	ErrorItemReaderFailed       = "States.ItemReaderFailed"
	ErrorResultWriterFailed     = "States.ResultWriterFailed"
	ErrorLambdaServiceException = "Lambda.ServiceException"
	ErrorLambdaUnknown          = "Lambda.Unknown"
	errorAbortedInternal        = "States.Aborted"
)

// Error is a named States Language error: what a state fails with and what
// Retry and Catch match on.
type Error struct {
	Name  string
	Cause string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Cause == "" {
		return e.Name
	}
	return e.Name + ": " + e.Cause
}

// Errorf builds an *Error with a formatted cause.
func Errorf(name, format string, args ...any) *Error {
	return &Error{Name: name, Cause: fmt.Sprintf(format, args...)}
}

func runtimeErr(format string, args ...any) *Error {
	return Errorf(ErrorRuntime, format, args...)
}

// terminal reports errors that States.ALL does not catch or retry.
func terminal(name string) bool {
	return name == ErrorRuntime || name == ErrorDataLimitExceeded
}

// matches reports whether a Retrier/Catcher ErrorEquals list matches name.
func matches(errorEquals []string, name string) bool {
	for _, want := range errorEquals {
		switch want {
		case name:
			return true
		case ErrorAll:
			if !terminal(name) {
				return true
			}
		case ErrorTaskFailed:
			if name != ErrorTimeout && !terminal(name) && name != errorAbortedInternal {
				return true
			}
		}
	}
	return false
}
