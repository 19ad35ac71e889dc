# Check a data set (written by pydaf, or by anything else) against a manifest (written by `pydaf manifest`): Julia's
# DataAxesFormats opens the data set, computes its manifest (julia/manifest.jl, the same definition as pydaf's) and
# compares every property: names, element types, shapes, which matrix layouts are stored, dense or sparse storage, and
# the hash of every value.
#
#     julia --project=julia julia/verify.jl [--format H5df|FilesDaf|ZarrDaf|ZipDaf] [--ignore-storage] \
#         DATA_SET MANIFEST.json
#     julia --project=julia julia/verify.jl [--format ...] --print DATA_SET     # print Julia's manifest instead
#
# DATA_SET is opened with `open_daf` (by its suffix: .h5df, .h5dfs#/group, .daf.zarr, .daf.zarr.zip, .daf.zip, else a
# FilesDaf directory) unless `--format` names the constructor. `--print` writes the manifest byte for byte as
# `pydaf manifest` does. The exit code says what happened (and the first word of the message says it too):
#   0  OK          the data set holds exactly what the manifest says
#   1  MISMATCH    it does not: each difference is listed on stderr
#   2  USAGE       bad arguments
#   3  UNREADABLE  the data set or the manifest can't be read (the message says which, with Julia's error)
#   4  FAILED      verify.jl itself failed (a bug: the message has Julia's error and backtrace)
# Julia exits with 1 on an uncaught exception, so every exception is caught here and given its own code.

include(joinpath(@__DIR__, "manifest.jl"))

const EXIT_OK = 0
const EXIT_MISMATCH = 1
const EXIT_USAGE = 2
const EXIT_UNREADABLE = 3
const EXIT_FAILED = 4

const FORMATS = ("H5df", "FilesDaf", "ZarrDaf", "ZipDaf")

const USAGE =
    "USAGE: julia --project=julia julia/verify.jl [--format H5df|FilesDaf|ZarrDaf|ZipDaf] [--ignore-storage] " *
    "(DATA_SET MANIFEST.json | --print DATA_SET)"

function open_data_set(path::AbstractString, format::Union{AbstractString, Nothing})::DafReader
    if format === nothing
        return open_daf(path, "r")
    end
    return getfield(DataAxesFormats, Symbol(format))(path, "r")
end

function unreadable(what::AbstractString, path::AbstractString, exception::Any)::Int
    println(stderr, "UNREADABLE: can't read the $(what): $(path) (exit code $(EXIT_UNREADABLE))")
    showerror(stderr, exception)
    println(stderr)
    return EXIT_UNREADABLE
end

# Julia's manifest of the data set (through JSON, so both sides have JSON's types), or the exit code.
function data_set_manifest(path::AbstractString, format::Union{AbstractString, Nothing})::Union{Tuple{String, Any}, Int}
    try
        text = manifest_text(open_data_set(path, format))
        return (text, JSON.parse(text))
    catch exception
        exception isa InterruptException && rethrow()
        return unreadable("data set", path, exception)
    end
end

function read_manifest(path::AbstractString)::Union{AbstractDict, Int}
    try
        manifest = JSON.parse(read(path, String))
        if !(manifest isa AbstractDict) ||
           get(manifest, "manifest", nothing) != "daf-manifest" ||
           get(manifest, "version", nothing) != MANIFEST_VERSION
            error("not a version $(MANIFEST_VERSION) daf manifest")
        end
        return manifest
    catch exception
        exception isa InterruptException && rethrow()
        return unreadable("manifest", path, exception)
    end
end

function main(arguments::AbstractVector{<:AbstractString})::Int
    format = nothing
    storage = true
    print_only = false
    positional = String[]
    index = 1
    while index <= length(arguments)
        argument = arguments[index]
        if argument == "--format" && index < length(arguments) && arguments[index + 1] in FORMATS
            format = arguments[index + 1]
            index += 2
            continue
        elseif argument == "--ignore-storage"
            storage = false
        elseif argument == "--print"
            print_only = true
        elseif startswith(argument, "--")
            println(stderr, USAGE)
            return EXIT_USAGE
        else
            push!(positional, argument)
        end
        index += 1
    end
    if length(positional) != (print_only ? 1 : 2)
        println(stderr, USAGE)
        return EXIT_USAGE
    end

    check_python_float_text()
    path = positional[1]
    if print_only
        computed = data_set_manifest(path, format)
        computed isa Int && return computed
        print(computed[1])
        return EXIT_OK
    end

    manifest_path = positional[2]
    expected = read_manifest(manifest_path)
    expected isa Int && return expected
    computed = data_set_manifest(path, format)
    computed isa Int && return computed
    actual = computed[2]
    differences = manifest_differences(expected, actual; storage = storage)
    if isempty(differences)
        count = sum(length(flatten_manifest(actual, section, depth)) for (section, depth) in MANIFEST_SECTIONS)
        version = pkgversion(DataAxesFormats)
        println("OK: $(path) matches $(manifest_path) ($(count) properties, DataAxesFormats $(version))")
        return EXIT_OK
    end
    println(stderr, "MISMATCH: $(path) differs from $(manifest_path) (exit code $(EXIT_MISMATCH)):")
    for difference in differences
        println(stderr, "  ", difference)
    end
    return EXIT_MISMATCH
end

function verify(arguments::AbstractVector{<:AbstractString})::Int
    try
        return main(arguments)
    catch exception
        exception isa InterruptException && rethrow()
        println(stderr, "FAILED: verify.jl itself failed (exit code $(EXIT_FAILED)):")
        showerror(stderr, exception, catch_backtrace())
        println(stderr)
        return EXIT_FAILED
    end
end

exit(verify(ARGS))
