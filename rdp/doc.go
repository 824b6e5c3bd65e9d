// Package rdp writes the .rdp file a connect's answer carries (the file
// mstsc, the Microsoft Remote Desktop apps, FreeRDP and Remmina open) and
// reads the admin's extra .rdp properties (serve --rdp-defaults). It does
// no I/O.
package rdp
