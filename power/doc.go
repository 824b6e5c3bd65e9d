// Package power starts and stops session hosts for the broker
// (R-A4): a Driver per kind of infrastructure, configured only on the
// broker (serve --power-config), never through the API, so that no API
// caller can make the broker run a command or call a URL.
//
// Three drivers: Exec runs an argv per action without a shell, Webhook
// POSTs a JSON body per action, Simulated keeps the state in memory (demo,
// simulator, tests). Load reads the YAML file that names them.
//
// Service is the power service beside them (vdibroker.PowerService): it
// records a host's power state in the broker's store before and after it
// asks the pool's driver (service.go), starts a stopped (else a silent
// Unknown) host for a connect that found no capacity (start VM on
// connect, R-A4), and polls the drivers of stopping hosts.
package power
