/*
 * Opens files the way an application does, for the layout tests:
 *   layouts LUSTRE_DIR OTHER_DIR N
 * writes plain.dat and pfl.dat under LUSTRE_DIR (open, write, close), reads plain.dat
 * back with stdio, opens the directory itself, then writes N files in OTHER_DIR.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(const char *dir, const char *name, size_t bytes)
{
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    memset(buf, 'x', sizeof buf);
    for (size_t done = 0; done < bytes; done += sizeof buf)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            exit(1);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    put(argv[1], "plain.dat", 1 << 16);
    put(argv[1], "pfl.dat", 1 << 16);
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/plain.dat", argv[1]);
    FILE *f = fopen(path, "r");
    if (!f || fread(buf, 1, sizeof buf, f) != sizeof buf)
        return 1;
    fclose(f);
    int d = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (d >= 0)
        close(d);
    for (int i = 0; i < atoi(argv[3]); i++) {
        char name[32];
        snprintf(name, sizeof name, "f%03d.dat", i);
        put(argv[2], name, 4096);
    }
    return 0;
}
