# Check a data set (written by pydaf, or by anything else) against a manifest (written by `pydaf manifest`): Julia's
# DataAxesFormats opens the data set, computes its manifest (julia/manifest.jl, the same definition as pydaf's) and
# compares every property: names, element types, shapes, which matrix layouts are stored, dense or sparse storage, and
# the hash of every value.
#
#     julia --project=julia julia/verify.jl [--format H5df|FilesDaf|ZarrDaf|ZipDaf] [--ignore-storage] DATA_SET MANIFEST.json
#     julia --project=julia julia/verify.jl [--format ...] --print DATA_SET     # print Julia's manifest instead
#
# DATA_SET is opened with `open_daf` (by its suffix: .h5df, .h5dfs#/group, .daf.zarr, .daf.zarr.zip, .daf.zip, else a FilesDaf directory)
# unless `--format` names the constructor. Exits 0 if everything matches, 1 (listing the differences on stderr) if
# not, 2 on a usage error.

include(joinpath(@__DIR__, "manifest.jl"))

const USAGE = "usage: julia --project=julia julia/verify.jl [--format H5df|FilesDaf|ZarrDaf|ZipDaf] [--ignore-storage] " *
              "(DATA_SET MANIFEST.json | --print DATA_SET)"

function open_data_set(path::AbstractString, format::Union{AbstractString, Nothing})::DafReader
    if format === nothing
        return open_daf(path, "r")
    end
    return getfield(DataAxesFormats, Symbol(format))(path, "r")
end

function main(arguments::AbstractVector{<:AbstractString})::Int
    format = nothing
    storage = true
    print_only = false
    positional = String[]
    index = 1
    while index <= length(arguments)
        argument = arguments[index]
        if argument == "--format" && index < length(arguments) && arguments[index + 1] in ("H5df", "FilesDaf", "ZarrDaf", "ZipDaf")
            format = arguments[index + 1]
            index += 2
            continue
        elseif argument == "--ignore-storage"
            storage = false
        elseif argument == "--print"
            print_only = true
        elseif startswith(argument, "--")
            println(stderr, USAGE)
            return 2
        else
            push!(positional, argument)
        end
        index += 1
    end

    if print_only
        if length(positional) != 1
            println(stderr, USAGE)
            return 2
        end
        println(manifest_text(open_data_set(positional[1], format)))
        return 0
    end

    if length(positional) != 2
        println(stderr, USAGE)
        return 2
    end
    path, manifest_path = positional
    expected = JSON.parse(read(manifest_path, String))
    actual = JSON.parse(manifest_text(open_data_set(path, format)))  # through JSON, so both sides have JSON's types
    differences = manifest_differences(expected, actual; storage = storage)
    if isempty(differences)
        count = sum(length(flatten_manifest(actual, section, depth)) for (section, depth) in MANIFEST_SECTIONS)
        println("OK: $(path) matches $(manifest_path) ($(count) properties, DataAxesFormats $(pkgversion(DataAxesFormats)))")
        return 0
    end
    println(stderr, "MISMATCH: $(path) differs from $(manifest_path):")
    for difference in differences
        println(stderr, "  ", difference)
    end
    return 1
end

exit(main(ARGS))
