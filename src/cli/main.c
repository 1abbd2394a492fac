/* main.c — the dtrain command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "dtrain/core.h"

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: dtrain <command> [options]\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "dtrain: unknown command '%s'\n", argv[1]);
    return 2;
}
