/* baton-lincheck: see lincheck.h and docs/history-format.md. */
#include "lincheck.h"

int main(int argc, char **argv)
{
	return lincheck_cli(argc, argv, stdout, stderr);
}
