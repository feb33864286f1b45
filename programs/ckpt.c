/*
 * ckpt.c - the `ckpt` program: read PyTorch checkpoints without PyTorch.
 *
 * Each command is one entry in `commands` below and one cmd_xxx() declared
 * in cli.h; `ckpt --help` lists the table.
 */
#include "cli.h"

#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"ls", cmd_ls, "list the tensors: name, dtype, shape, storage"},
    {"show", cmd_show, "print the whole saved object as a tree (or as JSON)"},
    {"cat", cmd_cat, "write one tensor's elements, little-endian, to stdout or a file"},
    {"convert", cmd_convert, "write the tensors as a safetensors file"},
    {"scan", cmd_scan, "list every global the pickles reference, with a safety verdict"},
    {"verify", cmd_verify, "check every checksum, size and extent in the file"},
    {"info", cmd_info, "summarise: format, parameters per dtype, keys, module tree"},
    {"extract", cmd_extract, "write tensors as NumPy .npy files"},
    {"diff", cmd_diff, "compare the tensors of two checkpoints (exit 1 when they differ)"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(void)
{
    size_t i, w = 0;
    fputs("Usage: ckpt COMMAND [OPTIONS] FILE ...\n"
          "Read PyTorch checkpoints (.pt, .pth, .bin, .ckpt) without PyTorch and\n"
          "without running any code from the file.\n"
          "\n"
          "Commands:\n",
          stdout);
    for (i = 0; i < NCOMMANDS; i++)
        if (strlen(commands[i].name) > w) w = strlen(commands[i].name);
    for (i = 0; i < NCOMMANDS; i++)
        printf("  %-*s  %s\n", (int)w, commands[i].name, commands[i].summary);
    fputs("\n"
          "Options:\n"
          "  -h, --help     show this help; 'ckpt COMMAND --help' for a command\n"
          "  -V, --version  print the version\n"
          "\n"
          "Files:\n"
          "  FILE '-' reads a checkpoint from standard input (a pipe is spooled to\n"
          "  a temporary file); FIFOs and devices named as FILE are refused.\n"
          "  FILE may also be a .safetensors file, a shard index (*.index.json),\n"
          "  a folder holding one, or a torch.distributed.checkpoint folder: its\n"
          "  files are read as one checkpoint.\n"
          "  Commands that write (cat -o, extract, convert) never replace an\n"
          "  existing file without --force, never write over their input, keep a\n"
          "  replaced file's mode, resolve a symlink OUT to its target, write a\n"
          "  device or a FIFO in place, make OUT appear only once complete, and\n"
          "  fsync only with --sync.  OUT '-' is standard output; binary output\n"
          "  is not sent to a terminal unless asked for with '-o -'.\n"
          "  ls, show, info, scan and verify take several files: they go on past\n"
          "  one that cannot be read and exit with the worst status; text output\n"
          "  gets a '==> FILE <==' header per file, --json one object per line.\n"
          "  A progress bar is drawn on standard error, when it is a terminal,\n"
          "  for long jobs.\n"
          "\n"
          "Names:\n"
          "  Text from a file is shown escaped (\\x00, \\x1b, \\u202e); a NAME\n"
          "  (cat, extract) and --key K are typed the same way.  --key K is a\n"
          "  top-level key or a path of keys (optimizer.state.0) in every\n"
          "  command.  --json keeps every byte of names and file names: \\u0000,\n"
          "  \\uXXXX for invisible characters, \\udcXX for a byte that is not\n"
          "  UTF-8 (Python: json.loads(s).encode('utf-8', 'surrogateescape')).\n"
          "\n",
          stdout);
    cli_limits_usage(stdout);
    fputs("\n"
          "Exit status: 0 success, 1 failure (the file could not be read, ...),\n"
          "2 usage error, 3 'scan' found something dangerous.\n",
          stdout);
}

int main(int argc, char **argv)
{
    const char *arg;
    size_t i;

    cli_stdout_init();
    if (cli_env_init() != 0) return cli_stdout_finish(CLI_USAGE);
    if (argc < 2) return cli_stdout_finish(cli_usage_error("missing command"));
    arg = argv[1];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        print_usage();
        return cli_stdout_finish(CLI_OK);
    }
    if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
        printf("ckpt %s\n", CKPT_VERSION_STRING);
        return cli_stdout_finish(CLI_OK);
    }
    if (arg[0] == '-') return cli_stdout_finish(cli_usage_error("unknown option '%s'", arg));
    for (i = 0; i < NCOMMANDS; i++)
        if (strcmp(arg, commands[i].name) == 0)
            return cli_stdout_finish(commands[i].run(argc - 1, argv + 1));
    return cli_stdout_finish(cli_usage_error("unknown command '%s'", arg));
}
